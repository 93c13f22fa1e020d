package infra

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/ports"
)

// BuildReconcile wires the operator's reconcile tool: the gate, the database,
// and in stream mode the gate's streams as the backlog (a channel's is inside
// the service's process and cannot be seen).
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
	// The service's own provider, so the tool sees the gate and its streams
	// under the very keys and options the service writes them with.
	vouchers, orders := mysqlstore.NewVoucherRepo(db), mysqlstore.NewOrderRepo(db)
	gate := provideGate(rdb, ClaimRedis{rdb}, c, vouchers, orders)
	var backlog ports.QueueBacklog
	if c.Queue == QueueStream {
		backlog = gate
	}
	return application.NewReconcileVoucher(vouchers, orders, gate, backlog), cleanup, nil
}
