package infra

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/ports"
)

// BuildReconcile wires the operator's reconcile tool: the gate, the database,
// and in stream mode the stream's backlog (a channel's is inside the
// service's process and cannot be seen).
func BuildReconcile(c Config, log zerolog.Logger) (*application.ReconcileVoucher, func(), error) {
	rdb, closeRedis, err := NewRedis(c, log)
	if err != nil {
		return nil, nil, err
	}
	db, closeDB, err := NewDB(c, log)
	if err != nil {
		closeRedis()
		return nil, nil, err
	}
	cleanup := func() { closeDB(); closeRedis() }
	// --fix writes this database's state into Redis: only into its own prefix.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := BindDeployment(ctx, db, rdb, c); err != nil {
		cleanup()
		return nil, nil, err
	}
	var backlog ports.QueueBacklog
	if c.Queue == QueueStream {
		// No consumer lease: reconcile only counts the backlog, and runs
		// beside the live instance that holds the name.
		q, closeQueue, err := provideStreamQueue(rdb, c, log, nil)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		backlog = q
		cleanup = func() { closeQueue(); closeDB(); closeRedis() }
	}
	// The service's own providers, so the tool sees the gate and the stream
	// under the very keys and options the service writes them with.
	vouchers, orders := mysqlstore.NewVoucherRepo(db), mysqlstore.NewOrderRepo(db)
	gate := provideGate(rdb, ClaimRedis{rdb}, c, vouchers, orders)
	if backlog != nil {
		// A split voucher's backlog is its bucket streams'.
		backlog = redisgate.NewBacklog(backlog, gate)
	}
	return application.NewReconcileVoucher(vouchers, orders, gate, backlog), cleanup, nil
}
