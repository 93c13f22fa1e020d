package application

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// ReconcileVoucher compares a voucher's gate with the database, the source of
// truth, and can repair the gate from it (after a channel-mode crash or a
// Redis data loss).
type ReconcileVoucher struct {
	vouchers ports.VoucherRepository
	orders   ports.OrderRepository
	gate     ports.GateAudit
	backlog  ports.QueueBacklog // nil: the queue's backlog cannot be seen from here
	ledger   ports.OrderLedger  // nil: orders is no ledger, the report has no Books
}

func NewReconcileVoucher(vouchers ports.VoucherRepository, orders ports.OrderRepository, gate ports.GateAudit, backlog ports.QueueBacklog) *ReconcileVoucher {
	mustHave("ReconcileVoucher", map[string]any{"vouchers": vouchers, "orders": orders, "gate": gate})
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
	Pending    int64 // what a durable queue still holds; -1: cannot be seen
	// InFlight: claims the gate and the queue hold and the database not yet.
	InFlight []domain.VoucherOrder
	// NotInDB: claims the gate holds that neither the database nor the queue
	// was seen to: lost, or (Pending -1) maybe in a running instance's channel.
	NotInDB      []domain.VoucherOrder
	QueuePartial bool // only the oldest maxQueueScan entries were looked at
	// NotInGate: orders in none of their users' places in the gate.
	NotInGate []domain.VoucherOrder
	// Forgotten counts those of NotInGate whose user the gate marks fewer times
	// than the limit per user: writes Redis lost, which RestoreGate.Repair
	// heals. The rest are places taken by a claim made again after the loss.
	Forgotten int
	Books     ports.SaleTally // when HasBooks
	HasBooks  bool
}

// Unaccounted is by how many units the gate's side exceeds the database's (0
// without a gate). On each side stock left plus units held is the initial
// stock, so what the marks and orders do not account for is stock gone wrong.
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

// ErrBacklog: the queue still holds orders of the voucher, so the database is
// not yet the whole truth and the gate must not be overwritten from it.
var ErrBacklog = errors.New("the queue still holds orders of this voucher")

// Check compares without changing anything.
func (h *ReconcileVoucher) Check(ctx context.Context, id domain.VoucherID) (Report, error) {
	r, _, _, err := h.check(ctx, id)
	return r, err
}

// check also returns the database's side, so Fix writes what it compared.
// It reads in the order an order travels (gate, queue, database), so an order
// finished during the check is seen in the queue or the database, never lost.
func (h *ReconcileVoucher) check(ctx context.Context, id domain.VoucherID) (Report, domain.Voucher, []domain.VoucherOrder, error) {
	r := Report{Voucher: id, Pending: -1}
	var v domain.Voucher
	var err error
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
	buyers, err := h.orders.Buyers(ctx, id)
	if err != nil {
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
	byID := func(a, b domain.VoucherOrder) int { return cmp.Compare(a.ID(), b.ID()) }
	slices.SortFunc(r.InFlight, byID)
	slices.SortFunc(r.NotInDB, byID)
	slices.SortFunc(r.NotInGate, byID)
	return r, v, buyers, nil
}

// Fix sets the gate to the database's stock and buyers. It refuses while a
// durable queue holds orders of the voucher; a channel queue's cannot be seen,
// so the caller must make sure no instance is claiming or draining.
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
