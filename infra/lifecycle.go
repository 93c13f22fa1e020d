package infra

import (
	"context"
	"time"

	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/ports"
)

// The order lifecycle's wiring and its driving loop (issue 25).

func provideMySQLOrderRepo(db *bun.DB, c Config) *mysqlstore.OrderRepo {
	return mysqlstore.NewOrderRepo(db).WithPayWindow(c.PayWindow).WithReclaimAfterCancel(c.ReclaimAfterCancel)
}

func provideExpireOrders(life ports.OrderLifecycle, gate ports.StockGate, clock ports.Clock) *application.ExpireOrders {
	return application.NewExpireOrders(life, gate, clock, expiryBatch)
}

func providePayOrder(orders ports.OrderRepository, vouchers ports.VoucherRepository, life ports.OrderLifecycle, clock ports.Clock, c Config) *application.PayOrder {
	return application.NewPayOrder(orders, vouchers, life, clock, c.PayWindow)
}

// expiryLoop expires due orders and finishes interrupted returns every
// interval, at once again while a pass finds a full batch. It runs on every
// instance: the database hands each due order to one of them (SKIP LOCKED),
// and it runs with a window of 0 too, so that cancelled orders' units are
// returned. Errors are logged and retried at the next tick. Its metrics
// (orders expired, the expiry lag, units returned) are counted by the
// lifecycle's decorator (provideOrderLifecycle), payments with them.
func (a *App) expiryLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 10*every)
			res, err := a.Expire.Handle(pctx)
			cancel()
			if res.Expired > 0 || res.Returned > 0 {
				a.Log.Info().Int("expired", res.Expired).Int("returned", res.Returned).Msg("unpaid orders expired; units back on sale")
			}
			if err != nil {
				if ctx.Err() == nil {
					a.Log.Error().Err(err).Msg("order expiry pass failed; retrying at the next interval")
				}
				break
			}
			if !a.Expire.Full(res) {
				break
			}
		}
	}
}
