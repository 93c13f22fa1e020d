package component_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestRunningServiceRepairsALostGate: Redis loses a live voucher's gate and
// live-set entry while the service runs (a failover that dropped writes, a
// flushed node). It used to stay unclaimable (not_found) until a restart;
// the periodic restore now rebuilds it from MySQL within a few intervals,
// with the buyers MySQL has, so nobody buys twice.
func TestRunningServiceRepairsALostGate(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			app, base := startServiceOn(t, infra.QueueStream, b.Name, func(c *infra.Config) {
				c.RestoreInterval = 100 * time.Millisecond
			})
			ctx := context.Background()
			vid := createVoucher(t, base, 5)
			sessions := redissession.New(app.Redis, redissession.Options{TTL: time.Hour})
			token := func(u int) string {
				tok, err := sessions.Mint(ctx, domain.UserID(u))
				if err != nil {
					t.Fatal(err)
				}
				return tok
			}
			claim := func(tok string) envelope {
				_, env := postJSON(t, http.DefaultClient, fmt.Sprintf("%s/voucher-order/seckill/%d", base, vid), tok, nil)
				return env
			}
			first := token(1)
			if env := claim(first); !env.Success {
				t.Fatalf("first claim: %+v", env)
			}
			testenv.Eventually(t, 20*time.Second, func() (bool, string) {
				var n int
				err := app.DB.NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*)").Where("voucher_id = ?", vid).Scan(ctx, &n)
				return err == nil && n == 1, fmt.Sprintf("%d orders in MySQL (%v)", n, err)
			})

			k := redisgate.KeysFor(app.Config.KeyPrefix, vid)
			for _, key := range []string{k.Voucher, k.Buyers} { // one slot, but one DEL each keeps it plain
				if err := app.Redis.Del(ctx, key).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := app.Redis.SRem(ctx, k.Live, int64(vid)).Err(); err != nil {
				t.Fatal(err)
			}

			testenv.Eventually(t, 20*time.Second, func() (bool, string) {
				live, _ := app.Redis.SIsMember(ctx, k.Live, int64(vid)).Result()
				stock, err := app.Redis.HGet(ctx, k.Voucher, "stock").Int()
				return live && err == nil, fmt.Sprintf("live %v, stock %d (%v)", live, stock, err)
			})
			if stock, _ := app.Redis.HGet(ctx, k.Voucher, "stock").Int(); stock != 4 {
				t.Fatalf("repaired stock %d, want MySQL's 4", stock)
			}
			if env := claim(first); env.Success || env.Code != "duplicate" {
				t.Fatalf("the buyer MySQL holds claims again after the repair: %+v", env)
			}
			if env := claim(token(2)); !env.Success {
				t.Fatalf("a new buyer after the repair: %+v", env)
			}
		})
	}
}
