package infra

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/ports"
)

// The order lifecycle's wiring and its driving loop (issue 25).

// expiryEvery is how often an instance expires due orders and finishes the
// returns a crash left: well inside the promised 5 s.
const expiryEvery = time.Second

// expiryBatch bounds one expiry transaction; a full batch is followed by
// another at once.
const expiryBatch = 500

func provideMySQLOrderRepo(db *bun.DB, c Config) *mysqlstore.OrderRepo {
	return mysqlstore.NewOrderRepo(db).WithPayWindow(c.PayWindow).WithReclaimAfterCancel(c.ReclaimAfterCancel)
}

func provideExpireOrders(life ports.OrderLifecycle, gate ports.StockGate, clock ports.Clock) *application.ExpireOrders {
	return application.NewExpireOrders(life, gate, clock, expiryBatch)
}

func providePayOrder(orders ports.OrderRepository, vouchers ports.VoucherRepository, life ports.OrderLifecycle, index ports.OrderIndex, clock ports.Clock, c Config) *application.PayOrder {
	return application.NewPayOrder(orders, vouchers, life, index, clock, c.PayWindow)
}

// expiryPass expires due orders and finishes interrupted returns, at once
// again while a pass finds a full batch; the order expiry service runs it
// every second. It runs on every instance: the database hands each due
// order to one of them (SKIP LOCKED), and it runs with a window of 0 too, so
// that cancelled orders' units are returned. Errors are logged and retried
// at the next tick. Its metrics (orders expired, the expiry lag, units
// returned) are counted by the lifecycle's decorator (provideObservability),
// payments with them.
func expiryPass(expire *application.ExpireOrders, log zerolog.Logger) func(context.Context) {
	return func(ctx context.Context) {
		for ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 10*expiryEvery)
			res, err := expire.Handle(pctx)
			cancel()
			if res.Expired > 0 || res.Returned > 0 {
				log.Info().Int("expired", res.Expired).Int("returned", res.Returned).Msg("unpaid orders expired; units back on sale")
			}
			if err != nil {
				if ctx.Err() == nil {
					log.Error().Err(err).Msg("order expiry pass failed; retrying at the next interval")
				}
				return
			}
			if !expire.Full(res) {
				return
			}
		}
	}
}
