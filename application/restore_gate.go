package application

import (
	"context"
	"fmt"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// RestoreGate rebuilds the gate from the database for every sale that has not
// ended, where the gate has lost it (an embedded or restarted Redis keeps
// nothing, a failover may lose recent writes). Sales whose gate state exists
// are left as they are.
type RestoreGate struct {
	vouchers ports.VoucherRepository
	orders   ports.OrderRepository
	gate     ports.StockGate
	probe    ports.GateProbe
	clock    ports.Clock
}

func NewRestoreGate(vouchers ports.VoucherRepository, orders ports.OrderRepository, gate ports.StockGate, probe ports.GateProbe, clock ports.Clock) *RestoreGate {
	mustHave("RestoreGate", map[string]any{"vouchers": vouchers, "orders": orders, "gate": gate, "probe": probe, "clock": clock})
	return &RestoreGate{vouchers: vouchers, orders: orders, gate: gate, probe: probe, clock: clock}
}

// Handle returns how many vouchers it restored. At start it runs before
// claims are served: with a lost gate and an empty queue, the database's
// stock and buyers are exactly what the gate should hold.
func (h *RestoreGate) Handle(ctx context.Context) (int, error) {
	vs, err := h.live(ctx)
	if err != nil {
		return 0, err
	}
	return h.restore(ctx, vs)
}

// Repair is the periodic form of Handle for a running instance, and returns
// how many vouchers it repaired: it asks the
// gate which live vouchers it lacks (one pipelined probe for all of them)
// and restores only those, under the same rule (write only when absent), so
// a Redis that lost its data heals without a restart. Its steady cost is one
// database query and one Redis round trip per call.
//
// Orders still queued when the gate was lost are not in the database yet:
// the restored gate may then admit a few claims the database refuses
// (out_of_stock, duplicate); those end failed with their reason, never
// oversold, since the database's guarded decrement is the last word.
func (h *RestoreGate) Repair(ctx context.Context) (int, error) {
	vs, err := h.live(ctx)
	if err != nil || len(vs) == 0 {
		return 0, err
	}
	ids := make([]domain.VoucherID, len(vs))
	byID := make(map[domain.VoucherID]domain.Voucher, len(vs))
	for i, v := range vs {
		ids[i] = v.ID()
		byID[v.ID()] = v
	}
	missing, err := h.probe.Missing(ctx, ids)
	if err != nil || len(missing) == 0 {
		return 0, err
	}
	lost := make([]domain.Voucher, 0, len(missing))
	for _, id := range missing {
		lost = append(lost, byID[id])
	}
	// Counted as repaired whether the gate or only its live-set entry was
	// gone (Restore puts the entry back in both cases).
	if n, err := h.restore(ctx, lost); err != nil {
		return n, err
	}
	return len(lost), nil
}

func (h *RestoreGate) live(ctx context.Context) ([]domain.Voucher, error) {
	vs, err := h.vouchers.ListSeckillEndingAfter(ctx, h.clock.Now().Add(-time.Minute))
	if err != nil {
		return nil, fmt.Errorf("list live vouchers: %w", err)
	}
	return vs, nil
}

func (h *RestoreGate) restore(ctx context.Context, vs []domain.Voucher) (int, error) {
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
