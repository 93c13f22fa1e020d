package component_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
)

// TestOrderStatusCostsTheSameWhateverTheNumberOfLiveSales: with 1,000 live
// sales, a status lookup costs a constant, small number of Redis commands,
// and an unknown order id costs exactly what another user's id costs, so
// neither the answer nor its cost tells which ids exist.
func TestOrderStatusCostsTheSameWhateverTheNumberOfLiveSales(t *testing.T) {
	for _, queue := range []string{infra.QueueChannel, infra.QueueStream} {
		t.Run(queue, func(t *testing.T) {
			cfg := embeddedConfig(t, queue)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			cfg.Workers = 0 // keep the orders queued: the lookups below must reach Redis
			app := run(t, cfg, zerolog.Nop())
			base := "http://" + app.Addr()
			ctx := context.Background()

			gate := redisgate.New(app.Redis, redisgate.Options{Prefix: cfg.KeyPrefix})
			now := time.Now()
			for i := 0; i < 1000; i++ {
				sale, err := domain.NewSale(10, now.Add(-time.Hour), now.Add(time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 9, Title: "crowd"}, sale)
				if err != nil {
					t.Fatal(err)
				}
				if err := gate.Preheat(ctx, v.WithID(domain.VoucherID(100000+i))); err != nil {
					t.Fatal(err)
				}
			}
			vid := createVoucher(t, app, 10)
			if n, _ := app.Redis.SCard(ctx, redisschema.LiveSet(cfg.KeyPrefix)).Result(); n < 1001 {
				t.Fatalf("live set has %d vouchers, want at least 1,001", n)
			}

			store := redissession.New(app.Redis, redissession.Options{TTL: time.Hour})
			owner, _ := store.Mint(ctx, 1)
			other, _ := store.Mint(ctx, 2)
			_, env := postJSON(t, http.DefaultClient, fmt.Sprintf("%s/voucher-order/seckill/%d", base, vid), owner, nil)
			if !env.Success {
				t.Fatalf("claim: %+v", env)
			}
			var orderID string
			if err := json.Unmarshal(env.Data, &orderID); err != nil {
				t.Fatal(err)
			}

			counter := &requestTraffic{}
			app.Redis.AddHook(counter)
			status := func(token, id string) (int, int64) {
				counter.cmds.Store(0)
				req, _ := http.NewRequest(http.MethodGet, base+"/voucher-order/"+id, nil)
				req.Header.Set("authorization", token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode, counter.cmds.Load()
			}
			// Tokens are cached after their first use; warm both.
			status(owner, orderID)
			status(other, orderID)

			code, own := status(owner, orderID)
			if code != http.StatusOK {
				t.Fatalf("own queued order: HTTP %d", code)
			}
			code, otherUsers := status(other, orderID)
			if code != http.StatusNotFound {
				t.Fatalf("another user's order: HTTP %d, want 404", code)
			}
			code, unknown := status(other, "123456789012345")
			if code != http.StatusNotFound {
				t.Fatalf("unknown order: HTTP %d, want 404", code)
			}
			t.Logf("Redis commands per lookup with 1,001 live sales: own %d, another user's %d, unknown %d", own, otherUsers, unknown)
			if own < 1 || own > 2 {
				t.Fatalf("own order lookup cost %d Redis commands, want 1..2", own)
			}
			if otherUsers != unknown || unknown != 1 {
				t.Fatalf("another user's id cost %d commands, an unknown id %d: want the same, 1", otherUsers, unknown)
			}
		})
	}
}
