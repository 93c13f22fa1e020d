package application

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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
	mustHave("RestoreGate", "vouchers", vouchers, "orders", orders, "gate", gate, "probe", probe, "clock", clock)
	return &RestoreGate{vouchers: vouchers, orders: orders, gate: gate, probe: probe, clock: clock}
}

// RepairReport: the gates rebuilt, and those healed with what was put back.
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

// Repair rebuilds the gate of every live voucher that lacks it, then heals
// those behind the database. Orders lost with the queue are not seen: their
// buyers may claim again, and the database refuses what would oversell.
func (h *RestoreGate) Repair(ctx context.Context) (RepairReport, error) {
	var r RepairReport
	vs, err := h.vouchers.ListSeckillEndingAfter(ctx, h.clock.Now().Add(-time.Minute))
	if err != nil {
		return r, fmt.Errorf("list live vouchers: %w", err)
	}
	if len(vs) == 0 {
		return r, nil
	}
	// A control the gate refused must not hold up the restore: its error comes last.
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

// heal runs the exact diff (GateProbe.Heal) only where the gate marks fewer
// buyers than the database has orders, or holds more stock. The database is
// read first, so an order committed in between cannot look forgotten.
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
// stock added or paused (a moved end is left to the admin's retry). Set it
// before Repair runs.
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

// ReconcileVoucher compares a voucher's gate with the database, the source of
// truth, and can set the gate from it.
type ReconcileVoucher struct {
	vouchers ports.VoucherRepository
	orders   ports.OrderRepository
	gate     ports.GateAudit
	backlog  ports.QueueBacklog // nil: the queue's backlog cannot be seen from here
	ledger   ports.OrderLedger  // nil: orders is no ledger, the report has no Books
}

func NewReconcileVoucher(vouchers ports.VoucherRepository, orders ports.OrderRepository, gate ports.GateAudit, backlog ports.QueueBacklog) *ReconcileVoucher {
	mustHave("ReconcileVoucher", "vouchers", vouchers, "orders", orders, "gate", gate)
	h := &ReconcileVoucher{vouchers: vouchers, orders: orders, gate: gate, backlog: backlog}
	h.ledger, _ = orders.(ports.OrderLedger)
	return h
}

// maxQueueScan bounds the queue entries a check reads (Report.QueuePartial).
const maxQueueScan = 100_000

// Report is the difference between gate and database for one voucher.
type Report struct {
	Voucher    domain.VoucherID
	DBStock    int
	DBOrders   int // orders holding a unit (unpaid + paid)
	GateFound  bool
	GateStock  int
	GateBuyers int
	Pending    int64                 // what a durable queue still holds; -1: cannot be seen
	InFlight   []domain.VoucherOrder // in the gate and the queue, not in the database yet
	// NotInDB: in the gate, seen in neither the database nor the queue (lost,
	// or with Pending -1 maybe in a running instance's channel).
	NotInDB      []domain.VoucherOrder
	QueuePartial bool                  // only the oldest maxQueueScan entries were looked at
	NotInGate    []domain.VoucherOrder // orders in none of their users' places in the gate
	// Forgotten: those of NotInGate whose user the gate marks fewer times than
	// the limit (lost writes, which Repair heals).
	Forgotten int
	Books     ports.SaleTally // when HasBooks
	HasBooks  bool
}

// Unaccounted is by how many units the gate's side (stock + buyers) exceeds
// the database's (stock + orders); 0 without a gate.
func (r Report) Unaccounted() int {
	if !r.GateFound {
		return 0
	}
	return r.GateStock + r.GateBuyers - (r.DBStock + r.DBOrders)
}

// Consistent reports whether the gate matches the database exactly.
func (r Report) Consistent() bool {
	return r.GateFound && r.GateStock == r.DBStock && r.GateBuyers == r.DBOrders &&
		len(r.InFlight) == 0 && len(r.NotInDB) == 0 && len(r.NotInGate) == 0
}

// OnlyInFlight reports whether the gate and the database differ by the
// orders in flight and nothing else: nothing to repair.
func (r Report) OnlyInFlight() bool {
	return r.GateFound && len(r.InFlight) > 0 && len(r.NotInDB) == 0 && len(r.NotInGate) == 0 &&
		r.GateStock+len(r.InFlight) == r.DBStock && r.GateBuyers == r.DBOrders+len(r.InFlight)
}

// ErrBacklog: the database is not the whole truth yet; the gate must not be set from it.
var ErrBacklog = errors.New("the queue still holds orders of this voucher")

// Check compares without changing anything.
func (h *ReconcileVoucher) Check(ctx context.Context, id domain.VoucherID) (Report, error) {
	r, _, _, err := h.check(ctx, id)
	return r, err
}

// check also returns the database's side, so Fix writes what it compared. It
// reads gate, queue, database, the way an order travels, so none is missed.
func (h *ReconcileVoucher) check(ctx context.Context, id domain.VoucherID) (r Report, v domain.Voucher, buyers []domain.VoucherOrder, err error) {
	r = Report{Voucher: id, Pending: -1}
	if r.GateStock, r.GateFound, err = h.gate.Stock(ctx, id); err != nil {
		return r, v, nil, fmt.Errorf("gate stock of voucher %d: %w", id, err)
	}
	marks, err := h.gate.Buyers(ctx, id)
	if err != nil {
		return r, v, nil, fmt.Errorf("gate buyers of voucher %d: %w", id, err)
	}
	r.GateBuyers = len(marks)
	var queued map[domain.OrderID]domain.UserID // the queue's orders of the voucher
	if h.backlog != nil {
		if r.Pending, err = h.backlog.Pending(ctx, id); err != nil {
			return r, v, nil, fmt.Errorf("queue backlog of voucher %d: %w", id, err)
		}
		orders, complete, err := h.backlog.Orders(ctx, id, maxQueueScan)
		if err != nil {
			return r, v, nil, fmt.Errorf("orders queued for voucher %d: %w", id, err)
		}
		r.QueuePartial = !complete
		queued = make(map[domain.OrderID]domain.UserID, len(orders))
		for _, o := range orders {
			queued[o.ID()] = o.UserID()
		}
	}
	if v, err = h.vouchers.Get(ctx, id); err != nil {
		return r, v, nil, fmt.Errorf("voucher %d: %w", id, err)
	}
	if !v.IsSeckill() {
		return r, v, nil, &domain.ValidationError{Field: "voucher", Reason: fmt.Sprintf("%d is not a seckill voucher", id)}
	}
	if buyers, err = h.orders.Buyers(ctx, id); err != nil {
		return r, v, nil, fmt.Errorf("orders of voucher %d: %w", id, err)
	}
	r.DBStock = v.Sale().Stock()
	if h.ledger != nil {
		if r.Books, err = h.ledger.Tally(ctx, id); err != nil {
			return r, v, buyers, fmt.Errorf("books of voucher %d: %w", id, err)
		}
		r.HasBooks = true
	}
	inDB := make(map[domain.OrderID]domain.UserID, len(buyers))
	places := make(map[domain.UserID]int, len(marks)) // the gate's marks per user
	for _, u := range marks {
		places[u]++
	}
	for _, o := range buyers {
		if !o.HoldsUnit() {
			continue // a forfeited place: the gate's Buyers skips it too
		}
		r.DBOrders++
		inDB[o.ID()] = o.UserID()
		if u, ok := marks[o.ID()]; !ok || u != o.UserID() {
			r.NotInGate = append(r.NotInGate, o)
			if places[o.UserID()] < v.Sale().LimitPerUser() {
				r.Forgotten++
			}
		}
	}
	for oid, u := range marks {
		if du, ok := inDB[oid]; ok && du == u {
			continue
		}
		o, err := domain.NewVoucherOrder(oid, u, id)
		if err != nil {
			return r, v, buyers, fmt.Errorf("gate mark of user %d on voucher %d: %w", u, id, err)
		}
		if qu, ok := queued[oid]; ok && qu == u {
			r.InFlight = append(r.InFlight, o)
		} else {
			r.NotInDB = append(r.NotInDB, o)
		}
	}
	for _, l := range [][]domain.VoucherOrder{r.InFlight, r.NotInDB, r.NotInGate} {
		slices.SortFunc(l, func(a, b domain.VoucherOrder) int { return cmp.Compare(a.ID(), b.ID()) })
	}
	return r, v, buyers, nil
}

// Fix sets the gate to the database's stock and buyers, refusing while a
// durable queue holds orders of the voucher (ErrBacklog); a channel queue's
// cannot be seen, so no instance may be claiming or draining.
func (h *ReconcileVoucher) Fix(ctx context.Context, id domain.VoucherID) (Report, error) {
	before, v, buyers, err := h.check(ctx, id)
	if err != nil {
		return before, err
	}
	if before.Pending > 0 {
		return before, fmt.Errorf("voucher %d: %d entries: %w", id, before.Pending, ErrBacklog)
	}
	if before.Consistent() {
		return before, nil
	}
	if err := h.gate.Overwrite(ctx, v, buyers); err != nil {
		return before, fmt.Errorf("overwrite gate of voucher %d: %w", id, err)
	}
	return h.Check(ctx, id)
}
