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

// ReconcileVoucher compares a voucher's gate (Redis) with the database, the
// source of truth, and can repair the gate from it. It is what an operator
// runs after a channel-mode crash (orders the gate sold but the database never
// got) or a Redis data loss (orders the database has but the gate forgot).
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
	// Every repository of the service keeps its books too; one that does
	// not leaves the report without them rather than failing.
	h.ledger, _ = orders.(ports.OrderLedger)
	return h
}

// maxQueueScan bounds how many queue entries a check reads to find the orders
// in flight: a backlog larger than this is a fulfilment far behind, and what
// the check could not look at is reported as such (Report.QueuePartial).
const maxQueueScan = 100_000

// Report is the difference between gate and database for one voucher.
type Report struct {
	Voucher    domain.VoucherID
	DBStock    int
	DBOrders   int
	GateFound  bool
	GateStock  int
	GateBuyers int
	// Pending is what a durable queue still holds for the voucher; -1 when
	// the queue cannot be seen (an in-process channel of another process).
	Pending int64
	// InFlight: the gate holds these claims, the database does not have them
	// yet, and the queue still holds them (pending or not yet delivered):
	// not a difference, only fulfilment not done yet.
	InFlight []domain.VoucherOrder
	// NotInDB: the gate holds these claims, the database has no order for
	// them, and the queue was not seen to hold them: lost (a channel queue
	// that died), or, with a channel queue, possibly still in a running
	// instance's channel (Pending is -1 then: the check cannot tell).
	NotInDB []domain.VoucherOrder
	// QueuePartial: the queue held more than maxQueueScan entries and only
	// the oldest were looked at, so some of NotInDB may still be in flight.
	QueuePartial bool
	// NotInGate: the database has these orders and the gate holds them in
	// none of their users' places (the gate lost data, or marked another
	// order of the user).
	NotInGate []domain.VoucherOrder
	// Forgotten counts the orders of NotInGate whose user the gate marks
	// fewer times than the sale's limit per user (for one order per user:
	// not at all): committed orders whose writes Redis lost (a restart
	// without persistence, a failover to a replica that lagged). A running
	// service heals them within its repair interval (RestoreGate.Repair). The
	// rest of NotInGate are users whose places hold other orders: a claim made
	// again after such a loss, which the database refuses as a duplicate.
	Forgotten int
	// Books is the database's count of the voucher's orders by lifecycle
	// state (unpaid, paid, cancelled, refunding), when HasBooks. DBOrders
	// is Books.Unpaid + Books.Paid: the orders that hold a unit.
	Books    ports.SaleTally
	HasBooks bool
}

// Unaccounted is by how many units the gate's side exceeds the database's
// (0 without a gate to compare). Every sale keeps the same invariant on
// each side: what is left to sell plus what is held (unpaid + paid in the
// database; marked buyers, including claims in flight, in the gate) is the
// same initial stock, and a cancelled order is on neither side once its
// unit is back. So the marks and orders account for the stock difference,
// and what they do not is the stock itself gone wrong.
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
// orders in flight and nothing else: each holds a mark and a unit of stock
// that the database gets once the order is written. Nothing to repair; a
// check once the queue has drained finds them consistent.
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
//
// It reads in the order an order travels: the gate, then the queue, then the
// database. A claim is in the gate before it is in the queue (the stream mode
// appends in the same script), and an entry leaves the queue only after its
// order is committed; so an order finished while the check runs is either
// still seen in the queue or already in the database, never seen as lost.
// (Read the other way round, an order written between the database read and
// the queue read would look lost.) Claims made during the check can still
// show as differences: the gate was read before them.
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
	// The database last, see above.
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

// Fix sets the gate to the database's state: stock = the database's remaining
// stock, buyers = the users holding orders. It refuses while a durable queue
// still holds orders of the voucher (they would be forgotten by the gate and
// then created anyway). With a channel queue the backlog cannot be seen: the
// caller must make sure no service instance is running claims or draining.
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
