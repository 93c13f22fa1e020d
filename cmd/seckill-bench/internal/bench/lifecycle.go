package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
)

// The order lifecycle's cost (issue 25, item 7): what the pay window costs
// the claim path, and how fast one instance gives expired units back.

const (
	// ScenarioLifecycle is the wide sale on the channel queue twice, with
	// the pay window off (0, the original) and on (15 minutes): orders that
	// expire cost the claim path nothing beyond what the claim writes, so
	// the two should sell at the same rate (the issue allows 5% less).
	ScenarioLifecycle Scenario = "lifecycle"
	// ScenarioExpiry is a sale whose every order expires: the orders are
	// written to MySQL and marked in the gate directly (no HTTP), their
	// deadlines already past, then the service's own ExpireOrders runs pass
	// after pass until every unit is back in MySQL and in Redis.
	ScenarioExpiry Scenario = "expiry"
)

const (
	ModePayOff Mode = "pay-off" // SECKILL_PAY_WINDOW=0
	ModePayOn  Mode = "pay-15m" // SECKILL_PAY_WINDOW=15m
	ModeExpire Mode = "expire"  // one instance's expiry passes
)

// lifecycleScenarios are opt-in (not in "all": the expiry sale writes
// 100,000 orders first).
var lifecycleScenarios = []Scenario{ScenarioLifecycle, ScenarioExpiry}

var lifecycleModes = []Mode{ModePayOff, ModePayOn, ModeExpire}

// DefaultExpiryOrders is the expiry sale's size, as the issue states it.
const DefaultExpiryOrders = 100_000

const benchPayWindow = 15 * time.Minute

func lifecycleModesOf(sc Scenario) []Mode {
	switch sc {
	case ScenarioLifecycle:
		return []Mode{ModePayOff, ModePayOn}
	case ScenarioExpiry:
		return []Mode{ModeExpire}
	}
	return nil
}

// runLifecycle is the wide sale through the real service on the channel
// queue with the mode's pay window; everything else is runService's.
func (e *env) runLifecycle(ctx context.Context, m Mode, r *Result) error {
	window := time.Duration(0)
	if m == ModePayOn {
		window = benchPayWindow
	}
	saved := e.opts.Base.PayWindow
	e.opts.Base.PayWindow = window
	defer func() { e.opts.Base.PayWindow = saved }()
	r.note("wide sale, channel queue, SECKILL_PAY_WINDOW=%s", window)
	return e.runService(ctx, ScenarioWide, ModeChannel, r)
}

// runExpiry times the expiry of a whole sale. The service is built (not
// started, so its own loop does not race the timing) and its ExpireOrders
// is called as its loop calls it: again at once while a pass was full.
func (e *env) runExpiry(ctx context.Context, r *Result) (err error) {
	n := e.opts.ExpiryOrders
	if n <= 0 {
		n = DefaultExpiryOrders
	}
	r.Users, r.Stock = n, n
	space, err := e.newSpace(ScenarioExpiry, ModeExpire)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, space.cleanup()) }()
	cfg, err := e.serviceConfig(space, infra.QueueChannel)
	if err != nil {
		return err
	}
	cfg.PayWindow = benchPayWindow
	app, cleanup, err := infra.Build(cfg, zerolog.Nop())
	if err != nil {
		return fmt.Errorf("build service: %w", err)
	}
	defer cleanup()
	if _, err := mysqlstore.Migrate(ctx, app.DB); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	vid, setup, err := expiringSale(ctx, app, n)
	if err != nil {
		return err
	}
	r.note("%d orders written and marked in %.1fs (claimed %s ago: past their %s window)", n, setup.Seconds(), expiredAgo, benchPayWindow)

	start := time.Now()
	passes, expired, returned := 0, 0, 0
	deadline := start.Add(e.opts.DrainTimeout)
	for {
		res, err := app.Expire.Handle(ctx)
		passes++
		expired += res.Expired
		returned += res.Returned
		if err != nil {
			return fmt.Errorf("expiry pass %d: %w", passes, err)
		}
		if !app.Expire.Full(res) && returned >= n {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %d passes (%s): %d of %d expired, %d returned", passes, e.opts.DrainTimeout, expired, n, returned)
		}
	}
	took := time.Since(start)
	r.HasDrain, r.DrainSeconds = true, took.Seconds()
	r.OrdersPerSec = float64(expired) / took.Seconds()
	mysqlStock, gateStock, buyers, err := expiryBooks(ctx, app, vid)
	if err != nil {
		return err
	}
	r.Drained = expired == n && mysqlStock == n && gateStock == n && buyers == 0
	r.note("%d passes (%.1f ms each); expired %d, units returned %d; stock back: MySQL %d, Redis %d (buyers marked %d)",
		passes, took.Seconds()*1000/float64(passes), expired, returned, mysqlStock, gateStock, buyers)
	if !r.Drained {
		return fmt.Errorf("books after the expiry: expired %d of %d, MySQL stock %d, Redis stock %d, buyers %d", expired, n, mysqlStock, gateStock, buyers)
	}
	return nil
}

// expiredAgo is how long before the run the expiry sale's orders were
// claimed: beyond the pay window, so every one is due at once.
const expiredAgo = 20 * time.Minute

// expiringSale creates a voucher of n units and n unpaid orders claimed
// expiredAgo, in MySQL (CreateBatch, so each gets its pay deadline) and in
// the gate (every buyer marked, no stock left), as a sold-out sale nobody
// paid for.
func expiringSale(ctx context.Context, app *infra.App, n int) (domain.VoucherID, time.Duration, error) {
	began := time.Now()
	v, err := saleVoucher(n)
	if err != nil {
		return 0, 0, err
	}
	vouchers := mysqlstore.NewVoucherRepo(app.DB)
	saved, err := vouchers.AddSeckill(ctx, v)
	if err != nil {
		return 0, 0, fmt.Errorf("create voucher: %w", err)
	}
	at := time.Now().Add(-expiredAgo)
	orders := make([]domain.VoucherOrder, n)
	for i := range orders {
		id, err := domain.NewOrderID(at, uint32(i+1))
		if err != nil {
			return 0, 0, err
		}
		if orders[i], err = domain.NewVoucherOrder(id, domain.UserID(i+1), saved.ID()); err != nil {
			return 0, 0, err
		}
	}
	repo := mysqlstore.NewOrderRepo(app.DB).WithPayWindow(benchPayWindow)
	const chunk = 1000
	for s := 0; s < n; s += chunk {
		if _, err := repo.CreateBatch(ctx, orders[s:min(s+chunk, n)]); err != nil {
			return 0, 0, fmt.Errorf("write orders: %w", err)
		}
	}
	sold, err := vouchers.Get(ctx, saved.ID())
	if err != nil {
		return 0, 0, err
	}
	if err := app.Gate.Overwrite(ctx, sold, orders); err != nil {
		return 0, 0, fmt.Errorf("mark the buyers in the gate: %w", err)
	}
	return saved.ID(), time.Since(began), nil
}

// expiryBooks reads where the units are after the expiry.
func expiryBooks(ctx context.Context, app *infra.App, vid domain.VoucherID) (mysqlStock, gateStock, buyers int, err error) {
	v, err := mysqlstore.NewVoucherRepo(app.DB).Get(ctx, vid)
	if err != nil {
		return 0, 0, 0, err
	}
	gateStock, _, err = app.Gate.Stock(ctx, vid)
	if err != nil {
		return 0, 0, 0, err
	}
	b, err := app.Gate.Buyers(ctx, vid)
	return v.Sale().Stock(), gateStock, len(b), err
}
