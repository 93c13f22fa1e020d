package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// RestoreGate repairs the gate of every sale not ended from the database: it
// rebuilds a gate that is gone and heals one that forgot committed orders,
// leaving claims in flight as they are.
type RestoreGate struct {
	vouchers ports.VoucherRepository
	orders   ports.OrderRepository
	gate     ports.StockGate
	probe    ports.GateProbe
	clock    ports.Clock
	controls ports.GateControls // nil: Repair applies no control again (WithControls)
}

func NewRestoreGate(vouchers ports.VoucherRepository, orders ports.OrderRepository, gate ports.StockGate, probe ports.GateProbe, clock ports.Clock) *RestoreGate {
	mustHave("RestoreGate", map[string]any{"vouchers": vouchers, "orders": orders, "gate": gate, "probe": probe, "clock": clock})
	return &RestoreGate{vouchers: vouchers, orders: orders, gate: gate, probe: probe, clock: clock}
}

// RepairReport: Restored counts the gates (or live-set entries) rebuilt,
// Healed the gates that were behind the database and what was put back.
type RepairReport struct {
	Restored int
	Healed   []HealedVoucher
}

type HealedVoucher struct {
	Voucher domain.VoucherID
	ports.Healed
}

// healPage is how many orders one step of the exact diff reads.
const healPage = 1000

// Repair rebuilds the gate of every live voucher that lacks it (reading only
// those vouchers' buyers), then heals those behind the database. It runs at
// start and every few seconds; its steady cost is two database queries and two
// Redis round trips. Orders lost with the queue are not seen: their buyers may
// claim again, and the database refuses what would oversell.
func (h *RestoreGate) Repair(ctx context.Context) (RepairReport, error) {
	var r RepairReport
	vs, err := h.vouchers.ListSeckillEndingAfter(ctx, h.clock.Now().Add(-time.Minute))
	if err != nil {
		return r, fmt.Errorf("list live vouchers: %w", err)
	}
	if len(vs) == 0 {
		return r, nil
	}
	// A control the gate refused must not hold up the restore that would
	// unfreeze it: its error is returned last.
	controlsErr := h.reapply(ctx, vs)
	ids := make([]domain.VoucherID, len(vs))
	byID := make(map[domain.VoucherID]domain.Voucher, len(vs))
	for i, v := range vs {
		ids[i] = v.ID()
		byID[v.ID()] = v
	}
	missing, err := h.probe.Missing(ctx, ids)
	if err != nil {
		return r, errors.Join(err, controlsErr)
	}
	for _, id := range missing {
		if err := restoreVoucher(ctx, h.orders, h.gate, byID[id]); err != nil {
			return r, errors.Join(err, controlsErr)
		}
	}
	r.Restored = len(missing)
	r.Healed, err = h.heal(ctx, vs, ids)
	return r, errors.Join(err, controlsErr)
}

// heal runs the exact diff (GateProbe.Heal, page by page) only where the cheap
// signal fires: the gate marks fewer buyers than the database has orders, or
// holds more stock. The database is read first, so an order committed in
// between cannot look forgotten. Claims in flight can hide a loss until they
// settle. ids are vs's ids, in order.
func (h *RestoreGate) heal(ctx context.Context, vs []domain.Voucher, ids []domain.VoucherID) ([]HealedVoucher, error) {
	orders, err := h.orders.CountBuyers(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("count orders of %d live vouchers: %w", len(ids), err)
	}
	gates, err := h.probe.Counts(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("count gate buyers of %d live vouchers: %w", len(ids), err)
	}
	var healed []HealedVoucher
	for _, v := range vs {
		g, ok := gates[v.ID()]
		if !ok || (g.Buyers >= orders[v.ID()] && g.Stock <= v.Sale().Stock()) {
			continue
		}
		hv, err := h.healVoucher(ctx, v)
		if err != nil {
			return healed, err
		}
		if hv.Restored > 0 {
			healed = append(healed, hv)
		}
	}
	return healed, nil
}

func (h *RestoreGate) healVoucher(ctx context.Context, v domain.Voucher) (HealedVoucher, error) {
	hv := HealedVoucher{Voucher: v.ID()}
	var after domain.OrderID
	for {
		page, err := h.orders.BuyersAfter(ctx, v.ID(), after, healPage)
		if err != nil {
			return hv, fmt.Errorf("list buyers of voucher %d: %w", v.ID(), err)
		}
		if len(page) == 0 {
			return hv, nil
		}
		got, err := h.probe.Heal(ctx, v, page)
		hv.Healed = hv.Add(got)
		if err != nil {
			return hv, fmt.Errorf("heal voucher %d: %w", v.ID(), err)
		}
		if len(page) < healPage {
			return hv, nil
		}
		after = page[len(page)-1].ID()
	}
}

// restoreVoucher writes v's gate from the database where the gate lacks it.
func restoreVoucher(ctx context.Context, orders ports.OrderRepository, gate ports.StockGate, v domain.Voucher) error {
	buyers, err := orders.Buyers(ctx, v.ID())
	if err != nil {
		return fmt.Errorf("list buyers of voucher %d: %w", v.ID(), err)
	}
	if _, err := gate.Restore(ctx, v, buyers); err != nil {
		return fmt.Errorf("restore gate of voucher %d: %w", v.ID(), err)
	}
	return nil
}

// WithControls makes Repair apply again the controls of every live sale with
// stock added or paused, so one whose gate write failed after the commit
// reaches the gate (Apply adds no unit twice). A moved end is left to the
// admin's retry. Set it before Repair runs.
func (h *RestoreGate) WithControls(c ports.GateControls) *RestoreGate {
	h.controls = c
	return h
}

func (h *RestoreGate) reapply(ctx context.Context, vs []domain.Voucher) error {
	if h.controls == nil {
		return nil
	}
	var errs []error
	for _, v := range vs {
		if s := v.Sale(); s.Added() == 0 && !s.Paused() {
			continue
		}
		if err := h.controls.Apply(ctx, v); err != nil {
			errs = append(errs, fmt.Errorf("apply the controls of voucher %d again: %w", v.ID(), err))
		}
	}
	return errors.Join(errs...)
}
