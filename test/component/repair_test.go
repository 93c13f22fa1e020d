package component_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/application"
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
			app, _ := startServiceOn(t, infra.QueueStream, b.Name, func(c *infra.Config) {
				c.RestoreInterval = 100 * time.Millisecond
			})
			ctx := context.Background()
			vid := createVoucher(t, app, 5)
			first := login(t, app, 1)
			if env := claim(t, app, vid, first); !env.Success {
				t.Fatalf("first claim: %+v", env)
			}
			testenv.Eventually(t, 20*time.Second, func() (bool, string) {
				var n int
				err := app.DB.NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*)").Where("voucher_id = ?", vid).Scan(ctx, &n)
				return err == nil && n == 1, fmt.Sprintf("%d orders in MySQL (%v)", n, err)
			})

			k := redisschema.KeysFor(app.Config.KeyPrefix, vid)
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
			if env := claim(t, app, vid, first); env.Success || env.Code != "duplicate" {
				t.Fatalf("the buyer MySQL holds claims again after the repair: %+v", env)
			}
			if env := claim(t, app, vid, login(t, app, 2)); !env.Success {
				t.Fatalf("a new buyer after the repair: %+v", env)
			}
		})
	}
}

// reconciler is the operator's reconcile tool (BuildReconcile) on app's
// Redis and database, closed when the test ends.
func reconciler(t *testing.T, app *infra.App) *application.ReconcileVoucher {
	t.Helper()
	rec, done, err := infra.BuildReconcile(app.Config, app.Log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	return rec
}

// TestReconcileOnEachRedis runs the operator's reconcile (BuildReconcile, the
// stream's backlog included) against a service's state on one node and on
// the cluster: it sees the books agree, sees a gate stock an operator broke,
// and fixes it.
func TestReconcileOnEachRedis(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			app, _ := startServiceOn(t, infra.QueueStream, b.Name)
			ctx := context.Background()
			vid := createVoucher(t, app, 5)
			mustClaim(t, app, vid, 1)
			mustClaim(t, app, vid, 2)
			rec := reconciler(t, app)
			testenv.Eventually(t, 20*time.Second, func() (bool, string) {
				r, err := rec.Check(ctx, vid)
				return err == nil && r.Consistent() && r.Pending == 0, fmt.Sprintf("%+v (%v)", r, err)
			})
			k := redisschema.KeysFor(app.Config.KeyPrefix, vid)
			if err := app.Redis.HSet(ctx, k.Voucher, "stock", 5).Err(); err != nil {
				t.Fatal(err)
			}
			if r, err := rec.Check(ctx, vid); err != nil || r.Consistent() {
				t.Fatalf("check after breaking the gate's stock: %+v, %v; want inconsistent", r, err)
			}
			r, err := rec.Fix(ctx, vid)
			if err != nil || !r.Consistent() || r.GateStock != 3 {
				t.Fatalf("fix: %+v, %v; want consistent with stock 3", r, err)
			}
		})
	}
}

// TestReconcileRightAfterClaimsSeesThemInFlight: an operator who runs
// reconcile while a sale's orders are still on their way to MySQL must not be
// told to repair anything. The worker is held (the voucher's stock row is
// locked, as a slow database would) so the claims stay in the stream.
func TestReconcileRightAfterClaimsSeesThemInFlight(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			app, _ := startServiceOn(t, infra.QueueStream, b.Name)
			ctx := context.Background()
			vid := createVoucher(t, app, 5)
			rec := reconciler(t, app)
			mustClaim(t, app, vid, 1)
			testenv.Eventually(t, 20*time.Second, func() (bool, string) {
				r, err := rec.Check(ctx, vid)
				return err == nil && r.Consistent() && r.DBOrders == 1, fmt.Sprintf("%+v (%v)", r, err)
			})

			tx, err := app.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			var stock int
			if err := tx.QueryRowContext(ctx, "SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ? FOR UPDATE", int64(vid)).Scan(&stock); err != nil {
				t.Fatal(err)
			}
			mustClaim(t, app, vid, 2)
			mustClaim(t, app, vid, 3)
			r, err := rec.Check(ctx, vid)
			if err != nil || !r.OnlyInFlight() || len(r.InFlight) != 2 || r.Pending != 2 || len(r.NotInDB) != 0 ||
				r.GateStock != 2 || r.DBStock != 4 {
				t.Fatalf("check with 2 orders held from MySQL: %+v, %v; want only 2 in flight", r, err)
			}
			if _, err := rec.Fix(ctx, vid); !errors.Is(err, application.ErrBacklog) {
				t.Fatalf("fix with orders in flight = %v, want ErrBacklog", err)
			}

			if err := tx.Rollback(); err != nil { // the worker goes on
				t.Fatal(err)
			}
			testenv.Eventually(t, 60*time.Second, func() (bool, string) {
				r, err := rec.Check(ctx, vid)
				return err == nil && r.Consistent() && r.DBOrders == 3 && r.Pending == 0, fmt.Sprintf("%+v (%v)", r, err)
			})
		})
	}
}

// TestStreamSpreadOverSlots: several vouchers are several hash tags, so on a
// cluster their streams live on different masters; the consumer must read
// them all (one XREADGROUP naming streams of several slots is a CROSSSLOT
// error there) and every order must land.
func TestStreamSpreadOverSlots(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			app, _ := startServiceOn(t, infra.QueueStream, b.Name)
			ctx := context.Background()
			const vouchers, users = 6, 8
			slots := map[int64]bool{}
			for i := 0; i < vouchers; i++ {
				vid := createVoucher(t, app, users)
				slot, err := app.Redis.ClusterKeySlot(ctx, redisschema.KeysFor(app.Config.KeyPrefix, vid).Orders).Result()
				if err == nil {
					slots[slot] = true
				}
				for u := domain.UserID(1); u <= users; u++ {
					mustClaim(t, app, vid, u)
				}
			}
			if b.Name == "redis_cluster" && len(slots) < 2 {
				t.Fatalf("the vouchers' streams share %d slot(s); the test needs several", len(slots))
			}
			testenv.Eventually(t, 30*time.Second, func() (bool, string) {
				var n int
				err := app.DB.NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*)").Scan(ctx, &n)
				return err == nil && n == vouchers*users, fmt.Sprintf("%d of %d orders in MySQL (%v)", n, vouchers*users, err)
			})
		})
	}
}
