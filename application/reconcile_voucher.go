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
}

func NewReconcileVoucher(vouchers ports.VoucherRepository, orders ports.OrderRepository, gate ports.GateAudit, backlog ports.QueueBacklog) *ReconcileVoucher {
	mustHave("ReconcileVoucher", map[string]any{"vouchers": vouchers, "orders": orders, "gate": gate})
	return &ReconcileVoucher{vouchers: vouchers, orders: orders, gate: gate, backlog: backlog}
}

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
	// NotInDB: the gate holds these claims, the database has no order for
	// them: still queued (Pending) or lost (a channel queue that died).
	NotInDB []domain.VoucherOrder
	// NotInGate: the database has these orders, the gate has no mark for
	// their users (the gate lost data), or a mark with another order id.
	NotInGate []domain.VoucherOrder
}

// Consistent reports whether the gate matches the database exactly.
func (r Report) Consistent() bool {
	return r.GateFound && r.GateStock == r.DBStock && r.GateBuyers == r.DBOrders &&
		len(r.NotInDB) == 0 && len(r.NotInGate) == 0
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
func (h *ReconcileVoucher) check(ctx context.Context, id domain.VoucherID) (Report, domain.Voucher, []domain.VoucherOrder, error) {
	r := Report{Voucher: id, Pending: -1}
	v, buyers, err := h.database(ctx, id)
	if err != nil {
		return r, v, nil, err
	}
	r.DBStock = v.Sale().Stock()
	r.DBOrders = len(buyers)
	if r.GateStock, r.GateFound, err = h.gate.Stock(ctx, id); err != nil {
		return r, v, buyers, fmt.Errorf("gate stock of voucher %d: %w", id, err)
	}
	marks, err := h.gate.Buyers(ctx, id)
	if err != nil {
		return r, v, buyers, fmt.Errorf("gate buyers of voucher %d: %w", id, err)
	}
	r.GateBuyers = len(marks)
	if h.backlog != nil {
		if r.Pending, err = h.backlog.Pending(ctx, id); err != nil {
			return r, v, buyers, fmt.Errorf("queue backlog of voucher %d: %w", id, err)
		}
	}
	inDB := make(map[domain.UserID]domain.OrderID, len(buyers))
	for _, o := range buyers {
		inDB[o.UserID()] = o.ID()
		if marks[o.UserID()] != o.ID() {
			r.NotInGate = append(r.NotInGate, o)
		}
	}
	for u, oid := range marks {
		if inDB[u] == oid {
			continue
		}
		o, err := domain.NewVoucherOrder(oid, u, id)
		if err != nil {
			return r, v, buyers, fmt.Errorf("gate mark of user %d on voucher %d: %w", u, id, err)
		}
		r.NotInDB = append(r.NotInDB, o)
	}
	byID := func(a, b domain.VoucherOrder) int { return cmp.Compare(a.ID(), b.ID()) }
	slices.SortFunc(r.NotInDB, byID)
	slices.SortFunc(r.NotInGate, byID)
	return r, v, buyers, nil
}

func (h *ReconcileVoucher) database(ctx context.Context, id domain.VoucherID) (domain.Voucher, []domain.VoucherOrder, error) {
	v, err := h.vouchers.Get(ctx, id)
	if err != nil {
		return v, nil, fmt.Errorf("voucher %d: %w", id, err)
	}
	if !v.IsSeckill() {
		return v, nil, &domain.ValidationError{Field: "voucher", Reason: fmt.Sprintf("%d is not a seckill voucher", id)}
	}
	buyers, err := h.orders.Buyers(ctx, id)
	if err != nil {
		return v, nil, fmt.Errorf("orders of voucher %d: %w", id, err)
	}
	return v, buyers, nil
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
