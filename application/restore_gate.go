package application

import (
	"context"
	"fmt"
	"time"

	"github.com/hmdp-go/seckill/ports"
)

// RestoreGate rebuilds the gate from the database for every sale that has not
// ended, where the gate has lost it (an embedded or restarted Redis keeps
// nothing). Sales whose gate state exists are left as they are.
type RestoreGate struct {
	vouchers ports.VoucherRepository
	orders   ports.OrderRepository
	gate     ports.StockGate
	clock    ports.Clock
}

func NewRestoreGate(vouchers ports.VoucherRepository, orders ports.OrderRepository, gate ports.StockGate, clock ports.Clock) *RestoreGate {
	mustHave("RestoreGate", map[string]any{"vouchers": vouchers, "orders": orders, "gate": gate, "clock": clock})
	return &RestoreGate{vouchers: vouchers, orders: orders, gate: gate, clock: clock}
}

// Handle returns how many vouchers it restored. It must run before claims are
// served: with a lost gate and an empty queue, the database's stock and buyers
// are exactly what the gate should hold.
func (h *RestoreGate) Handle(ctx context.Context) (int, error) {
	vs, err := h.vouchers.ListSeckillEndingAfter(ctx, h.clock.Now().Add(-time.Minute))
	if err != nil {
		return 0, fmt.Errorf("list live vouchers: %w", err)
	}
	restored := 0
	for _, v := range vs {
		buyers, err := h.orders.Buyers(ctx, v.ID())
		if err != nil {
			return restored, fmt.Errorf("list buyers of voucher %d: %w", v.ID(), err)
		}
		ok, err := h.gate.Restore(ctx, v, buyers)
		if err != nil {
			return restored, fmt.Errorf("restore voucher %d: %w", v.ID(), err)
		}
		if ok {
			restored++
		}
	}
	return restored, nil
}
