package component_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

// ownRedis is a redis-server of the test's own, without persistence, which
// the test may kill: the shared servers are never killed.
type ownRedis struct {
	port string
	cmd  *exec.Cmd
}

func startOwnRedis(t *testing.T) *ownRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if testenv.CI() {
			t.Fatal("redis-server is not on PATH")
		}
		t.Skip("redis-server is not on PATH")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	_ = l.Close()
	r := &ownRedis{port: port}
	r.start(t)
	t.Cleanup(func() { r.kill() })
	return r
}

func (r *ownRedis) url() string { return "redis://127.0.0.1:" + r.port + "/0" }

// start runs the server, empty, and waits until it answers.
func (r *ownRedis) start(t *testing.T) {
	t.Helper()
	r.cmd = exec.Command("redis-server", "--port", r.port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + r.port})
	defer c.Close()
	testenv.Eventually(t, 10*time.Second, func() (bool, string) {
		err := c.Ping(context.Background()).Err()
		return err == nil, fmt.Sprintf("own redis-server on %s: %v", r.port, err)
	})
}

// kill is kill -9: whatever the server held is gone.
func (r *ownRedis) kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

// TestGateHealsAfterRedisLostWrites: Redis fails over to a replica that
// lagged (here: the server is killed and comes back holding an older copy
// of the voucher's gate, as the promoted replica would), so orders committed
// in MySQL are forgotten by the gate. The gate exists, so the old repair
// (which rebuilt only a missing gate) left it: the forgotten buyers were
// told success again and their units sold twice. The running service now
// heals it from MySQL within its repair interval: every committed order's
// buyer marked again, the units taken off; no forgotten buyer gets a second
// success, the rest of the stock sells exactly once, and the books agree.
func TestGateHealsAfterRedisLostWrites(t *testing.T) {
	const (
		stock     = 20
		before    = 5  // committed and in the replica's copy
		forgotten = 7  // committed after the copy: lost in the failover
		newcomers = 30 // claim what is left after the heal
	)
	for _, queue := range []string{infra.QueueChannel, infra.QueueStream} {
		t.Run(queue, func(t *testing.T) {
			ctx := context.Background()
			own := startOwnRedis(t)
			app, _ := startServiceOn(t, queue, "redis", func(c *infra.Config) {
				c.RedisURL = own.url()
				c.RestoreInterval = 100 * time.Millisecond
			})
			vid := createVoucher(t, app, stock)
			k := redisschema.KeysFor(app.Config.KeyPrefix, vid)

			for u := domain.UserID(1); u <= before; u++ {
				mustClaim(t, app, vid, u)
			}
			waitOrders(t, app, vid, before)
			// The replica's copy: it lags from here on.
			replica := map[string]string{}
			for _, key := range []string{k.Voucher, k.Buyers} {
				dump, err := app.Redis.Dump(ctx, key).Result()
				if err != nil {
					t.Fatalf("dump %s: %v", key, err)
				}
				replica[key] = dump
			}
			for u := domain.UserID(before + 1); u <= before+forgotten; u++ {
				mustClaim(t, app, vid, u)
			}
			waitOrders(t, app, vid, before+forgotten)

			// The failover: the master dies, the replica takes over with its
			// older copy (and none of the sessions, streams or live set).
			own.kill()
			own.start(t)
			direct := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + own.port})
			defer direct.Close()
			if _, err := direct.TxPipelined(ctx, func(p redis.Pipeliner) error {
				for key, dump := range replica {
					p.RestoreReplace(ctx, key, 0, dump)
				}
				return nil
			}); err != nil {
				t.Fatalf("restore the replica's copy: %v", err)
			}

			// Healed within a few repair intervals: every order MySQL holds
			// has its buyer marked, and Redis holds MySQL's stock.
			testenv.Eventually(t, 20*time.Second, func() (bool, string) {
				lacking, err := lackingBuyers(ctx, app, vid, k)
				if err != nil {
					return false, err.Error()
				}
				rs, _ := app.Redis.HGet(ctx, k.Voucher, "stock").Int()
				ms := mysqlStock(t, app, vid)
				return len(lacking) == 0 && rs == ms, fmt.Sprintf("Redis lacks buyers %v; stock Redis %d, MySQL %d", lacking, rs, ms)
			})

			for u := domain.UserID(1); u <= before+forgotten; u++ {
				if env := claim(t, app, vid, login(t, app, u)); env.Success || env.Code != "duplicate" {
					t.Fatalf("buyer %d, whose order MySQL holds, claims again after the failover: %+v", u, env)
				}
			}
			won := 0
			for u := domain.UserID(1000); u < 1000+newcomers; u++ {
				if env := claim(t, app, vid, login(t, app, u)); env.Success {
					won++
				}
			}
			if won != stock-before-forgotten {
				t.Fatalf("%d newcomers won, want the %d units left", won, stock-before-forgotten)
			}
			waitOrders(t, app, vid, stock)

			// The books: MySQL sold the stock once, refused nothing, and
			// Redis agrees with it exactly.
			var failed int
			if err := app.DB.NewSelect().Table("tb_voucher_order_failure").ColumnExpr("COUNT(*)").
				Where("voucher_id = ?", vid).Scan(ctx, &failed); err != nil {
				t.Fatal(err)
			}
			rs, _ := app.Redis.HGet(ctx, k.Voucher, "stock").Int()
			marks, _ := app.Redis.HLen(ctx, k.Buyers).Result()
			if ms := mysqlStock(t, app, vid); failed != 0 || ms != 0 || rs != 0 || marks != stock {
				t.Fatalf("books: %d failed orders, MySQL stock %d, Redis stock %d, %d buyers marked; want 0, 0, 0, %d", failed, ms, rs, marks, stock)
			}
			if lacking, err := lackingBuyers(ctx, app, vid, k); err != nil || len(lacking) > 0 {
				t.Fatalf("Redis lacks the buyers %v of MySQL's orders (%v)", lacking, err)
			}
		})
	}
}

func waitOrders(t *testing.T, app *infra.App, vid domain.VoucherID, want int) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, func() (bool, string) {
		var n int
		err := app.DB.NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*)").Where("voucher_id = ?", vid).Scan(context.Background(), &n)
		return err == nil && n == want, fmt.Sprintf("%d orders in MySQL, want %d (%v)", n, want, err)
	})
}

func mysqlStock(t *testing.T, app *infra.App, vid domain.VoucherID) int {
	t.Helper()
	var s int
	if err := app.DB.NewSelect().Table("tb_seckill_voucher").Column("stock").Where("voucher_id = ?", vid).
		Scan(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// lackingBuyers lists the users holding an order in MySQL whom Redis does
// not mark (or marks with another order).
func lackingBuyers(ctx context.Context, app *infra.App, vid domain.VoucherID, k redisschema.Keys) ([]int64, error) {
	var rows []struct {
		ID     int64 `bun:"id"`
		UserID int64 `bun:"user_id"`
	}
	if err := app.DB.NewSelect().Table("tb_voucher_order").Column("id", "user_id").Where("voucher_id = ?", vid).
		Scan(ctx, &rows); err != nil {
		return nil, err
	}
	marks, err := app.Redis.HGetAll(ctx, k.Buyers).Result()
	if err != nil {
		return nil, err
	}
	var lacking []int64
	for _, r := range rows {
		if marks[strconv.FormatInt(r.UserID, 10)] != strconv.FormatInt(r.ID, 10) {
			lacking = append(lacking, r.UserID)
		}
	}
	return lacking, nil
}
