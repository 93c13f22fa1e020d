package component_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
)

// queries counts the SQL statements that HTTP requests run.
type queries struct{ n atomic.Int64 }

func (q *queries) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	if httpapi.RequestID(ctx) != "" {
		q.n.Add(1)
	}
	return ctx
}

func (q *queries) AfterQuery(context.Context, *bun.QueryEvent) {}

// TestSaleBoardCostIsBoundedPerSale: GET /admin/sales.json costs a fixed
// number of Redis commands and SQL statements per sale shown, whatever the
// claims and orders, and stops growing at the cap however many sales exist.
func TestSaleBoardCostIsBoundedPerSale(t *testing.T) {
	for _, queue := range []string{infra.QueueChannel, infra.QueueStream} {
		t.Run(queue, func(t *testing.T) {
			cfg := embeddedConfig(t, queue)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			app := run(t, cfg, zerolog.Nop())
			base := "http://" + app.Addr()
			admin, err := redissession.New(app.Redis, redissession.Options{TTL: time.Hour}).Mint(context.Background(), adminUID)
			if err != nil {
				t.Fatal(err)
			}
			// Only what the request sends: the repair's periodic probe of the
			// live gates (HGETs) runs in the background and would count too.
			cmds, sql := &requestTraffic{requestOnly: true}, &queries{}
			app.Redis.AddHook(cmds)
			app.DB.AddQueryHook(sql)
			board := func() (int64, int64) {
				t.Helper()
				cmds.cmds.Store(0)
				sql.n.Store(0)
				req, _ := http.NewRequest(http.MethodGet, base+"/admin/sales.json", nil)
				req.Header.Set("authorization", admin)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("board: HTTP %d", resp.StatusCode)
				}
				return cmds.cmds.Load(), sql.n.Load()
			}
			board() // the admin's token is cached from here on

			costs := map[int][2]int64{}
			sales := 0
			var first domain.VoucherID
			for _, n := range []int{1, 2, application.MaxSaleBoard, application.MaxSaleBoard + 3} {
				for ; sales < n; sales++ {
					if vid := createVoucher(t, app, 5); first == 0 {
						first = vid
					}
				}
				r, s := board()
				costs[n] = [2]int64{r, s}
			}
			perRedis := costs[2][0] - costs[1][0]
			perSQL := costs[2][1] - costs[1][1]
			t.Logf("%s: per sale shown %d Redis commands and %d SQL statements; costs by sales %v", queue, perRedis, perSQL, costs)
			// At most 5: the stream's XLEN, XPENDING and oldest entry, the
			// gate's stock, and the read of the voucher's bucket count K.
			if perSQL != 1 || perRedis < 1 || perRedis > 5 {
				t.Fatalf("per sale: %d Redis commands, %d SQL statements; want at most 5 and exactly 1", perRedis, perSQL)
			}
			if want := [2]int64{costs[1][0] + perRedis*(application.MaxSaleBoard-1), costs[1][1] + perSQL*(application.MaxSaleBoard-1)}; costs[application.MaxSaleBoard] != want {
				t.Fatalf("cost at the cap %v, want %v (linear in the sales shown)", costs[application.MaxSaleBoard], want)
			}
			if costs[application.MaxSaleBoard+3] != costs[application.MaxSaleBoard] {
				t.Fatalf("past the cap the cost grew: %v", costs)
			}

			// Claims and orders do not change what a reading costs.
			for u := 0; u < 5; u++ {
				tok, _ := redissession.New(app.Redis, redissession.Options{TTL: time.Hour}).Mint(context.Background(), domain.UserID(2000+u))
				if _, env := postJSON(t, http.DefaultClient, fmt.Sprintf("%s/voucher-order/seckill/%d", base, first), tok, nil); !env.Success {
					t.Fatalf("claim: %+v", env)
				}
			}
			if r, s := board(); r != costs[application.MaxSaleBoard][0] || s != costs[application.MaxSaleBoard][1] {
				t.Fatalf("after claims a reading costs %d Redis commands and %d SQL statements, before %v", r, s, costs[application.MaxSaleBoard])
			}
		})
	}
}
