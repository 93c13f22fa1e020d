package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// RestoreGate repairs the gate from the database for every sale that has not
// ended: it rebuilds a gate that is gone (an embedded or restarted Redis
// keeps nothing), and heals one that exists but forgot committed orders (a
// failover to a replica that lagged, a restart from an older snapshot).
// Whatever else a gate holds (claims in flight) is left as it is.
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

// RepairReport is what a Repair changed in the gate.
type RepairReport struct {
	// Restored counts the vouchers whose gate state (or live-set entry) was
	// gone and was rebuilt from the database.
	Restored int
	// Healed lists the vouchers whose gate existed but was behind the
	// database, and what was put back.
	Healed []HealedVoucher
}

// HealedVoucher is one voucher's heal.
type HealedVoucher struct {
	Voucher domain.VoucherID
	ports.Healed
}

// healPage is how many of a voucher's orders one step of the exact diff reads
// from the database and checks in the gate.
const healPage = 1000

// Repair rebuilds the gate of every live voucher that lacks it, then heals
// those that exist but are behind the database. It runs at start, before
// claims are served, and then every few seconds, so a Redis that lost its
// data heals without a restart. It asks the gate which live vouchers it
// lacks (one pipelined probe for all of them) and reads the buyers of those
// only: a start on a Redis that kept its data reads no voucher's buyers.
// Restore writes only what is absent, so a gate written since the probe is
// kept. Its steady cost is two database queries and two Redis round trips
// per call, whatever the number of orders.
//
// Orders still queued when the gate was lost are not in the database yet.
// Those still in the gate's stream keep their units and their buyers'
// places (the gate reads them); those lost with the stream, or held by a
// channel queue, are not seen at all: their buyers may claim again. The
// restored gate may then admit a few claims the database refuses
// (out_of_stock, duplicate); those end failed with their reason, never
// oversold, since the database's guarded decrement is the last word.
func (h *RestoreGate) Repair(ctx context.Context) (RepairReport, error) {
	var r RepairReport
	vs, err := h.vouchers.ListSeckillEndingAfter(ctx, h.clock.Now().Add(-time.Minute))
	if err != nil {
		return r, fmt.Errorf("list live vouchers: %w", err)
	}
	if len(vs) == 0 {
		return r, nil
	}
	// A control the gate refused (a bucket being restored) must not hold
	// up the restore that would unfreeze it: its error is returned last.
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
	// Counted as repaired whether the gate or only its live-set entry was
	// gone (Restore puts the entry back in both cases).
	for _, id := range missing {
		if err := restoreVoucher(ctx, h.orders, h.gate, byID[id]); err != nil {
			return r, errors.Join(err, controlsErr)
		}
	}
	r.Restored = len(missing)
	r.Healed, err = h.heal(ctx, vs, ids)
	return r, errors.Join(err, controlsErr)
}

// heal finds the gates that are behind the database and puts back what they
// forgot. The cheap signal comes first (GateProbe.Counts): normally the gate
// marks at least as many buyers as the database holds orders, and holds no
// more stock than the database (it takes a unit before the database does).
// The database is read before the gate, so an order committed in between
// has its mark already and cannot look forgotten. Only where the signal
// fires is the exact diff run: the voucher's orders read from the database
// page by page and each page's users checked in the gate (GateProbe.Heal).
//
// Claims in flight (marked, not yet committed) can hide a loss from the
// signal as long as they outnumber the forgotten orders; the loss shows once
// they are written or refused, at a later call.
//
// ids are vs's ids, in the same order.
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

// restoreVoucher writes v's gate from the database, with the buyers it
// holds, where the gate lacks it: Restore writes only what is absent.
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

// WithControls makes Repair apply again, to the gate, the controls of every
// live sale that has stock added or is paused (ControlSale's second step):
// an admin's control whose gate write failed after the database committed
// it (a Redis timeout, the process killed between the two) reaches the
// gate within one repair. It costs one script per such sale (per bucket
// for a split one), and adds no unit twice (GateControls.Apply). A sale
// whose end was moved is not read here: the admin's retry of that control
// writes it (it is idempotent). Set it before Repair runs.
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
