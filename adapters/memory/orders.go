package memory

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var _ ports.OrderRepository = (*Orders)(nil)

// Orders is the in-memory OrderRepository. It classifies a batch with the
// domain's rule (domain.PlanBatch), as mysqlstore.OrderRepo does, and holding
// its mutex for the whole batch plays the part of the SQL transaction and the
// stock-row lock. It is the only
// writer of its Vouchers' stock: build one Orders per Vouchers.
type Orders struct {
	vouchers *Vouchers

	mu      sync.Mutex
	created map[domain.OrderID]*orderLife
	failed  map[domain.OrderID]orderFailure
	// places: each buyer's orders that hold a place, the holders of a unit
	// and the cancelled orders that forfeited theirs (unless reclaim): they
	// hold no unit, but keep counting toward the limit.
	places  map[domain.VoucherID]map[domain.UserID][]domain.OrderID
	reclaim bool
	window  time.Duration
	// payments is every payment received, by transaction id (lifecycle.go).
	payments map[string]payment
}

type orderFailure struct {
	order  domain.VoucherOrder
	reason domain.FailureReason
}

func NewOrders(vouchers *Vouchers) *Orders {
	if vouchers == nil {
		panic("memory: NewOrders needs the Vouchers whose stock it sells")
	}
	return &Orders{
		vouchers: vouchers,
		created:  map[domain.OrderID]*orderLife{},
		failed:   map[domain.OrderID]orderFailure{},
		places:   map[domain.VoucherID]map[domain.UserID][]domain.OrderID{},
		payments: map[string]payment{},
	}
}

// CreateBatch reads what domain.PlanBatch needs and applies its plan under
// one hold of the mutex, so like the SQL repository it records the whole
// batch or nothing, and no other batch changes the state in between.
func (s *Orders) CreateBatch(ctx context.Context, orders []domain.VoucherOrder) ([]ports.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	st := domain.BatchState{
		Recorded: s.recordedOf(orders),
		Stock:    map[domain.VoucherID]int{},
		Limits:   map[domain.VoucherID]int{},
		Holders:  s.placesHeld(orders),
	}
	for _, o := range orders {
		v := o.VoucherID()
		if _, seen := st.Stock[v]; seen {
			continue
		}
		if left, limit, onSale := s.vouchers.saleOf(v); onSale {
			st.Stock[v], st.Limits[v] = left, limit
		}
	}
	plan := domain.PlanBatch(orders, st)

	for v, n := range plan.Taken {
		s.vouchers.take(v, n)
	}
	for _, o := range plan.Created {
		s.created[o.ID()] = &orderLife{
			order: o, slot: plan.Slots[o.ID()], state: domain.OrderCreated,
			Lifecycle: domain.Lifecycle{PayDeadline: domain.PayDeadline(o.ID(), s.window)},
		}
		v, u := o.VoucherID(), o.UserID()
		if s.places[v] == nil {
			s.places[v] = map[domain.UserID][]domain.OrderID{}
		}
		s.places[v][u] = append(s.places[v][u], o.ID())
	}
	s.recordFailures(plan.Failures)
	return plan.Outcomes, nil
}

// MarkFailed holds the same mutex as CreateBatch, so the two never both
// record one order.
func (s *Orders) MarkFailed(ctx context.Context, orders []domain.VoucherOrder, reason domain.FailureReason) ([]ports.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	plan := domain.PlanFailures(orders, reason, s.recordedOf(orders))
	s.recordFailures(plan.Failures)
	return plan.Outcomes, nil
}

// recordedOf is what is recorded under the orders' IDs; the caller holds s.mu.
func (s *Orders) recordedOf(orders []domain.VoucherOrder) map[domain.OrderID]domain.OrderStatus {
	rec := map[domain.OrderID]domain.OrderStatus{}
	for _, o := range orders {
		if st, ok := s.recorded(o.ID()); ok {
			rec[o.ID()] = st
		}
	}
	return rec
}

// recordFailures stores a plan's new failures; the caller holds s.mu.
func (s *Orders) recordFailures(failures []domain.Outcome) {
	for _, f := range failures {
		s.failed[f.Order.ID()] = orderFailure{order: f.Order, reason: f.Reason}
	}
}

func (s *Orders) Find(ctx context.Context, id domain.OrderID) (domain.OrderStatus, error) {
	if err := ctx.Err(); err != nil {
		return domain.OrderStatus{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.recorded(id); ok {
		return st, nil
	}
	return domain.OrderStatus{}, domain.ErrOrderNotFound
}

// recorded is what is recorded under id; the caller holds s.mu.
func (s *Orders) recorded(id domain.OrderID) (domain.OrderStatus, bool) {
	if l, ok := s.created[id]; ok {
		return domain.OrderStatus{Order: l.order, State: l.state, Lifecycle: l.Lifecycle}, true
	}
	if f, ok := s.failed[id]; ok {
		return domain.OrderStatus{Order: f.order, State: domain.OrderFailed, Reason: f.reason}, true
	}
	return domain.OrderStatus{}, false
}

func (s *Orders) Buyers(ctx context.Context, voucher domain.VoucherID) ([]domain.VoucherOrder, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	buyers := []domain.VoucherOrder{}
	for _, ids := range s.places[voucher] {
		for _, id := range ids {
			st, _ := s.recorded(id)
			buyers = append(buyers, st.Place())
		}
	}
	slices.SortFunc(buyers, func(a, b domain.VoucherOrder) int { return cmp.Compare(a.ID(), b.ID()) })
	return buyers, nil
}

// BuyersAfter pages Buyers as the SQL repository does: by id, above after.
func (s *Orders) BuyersAfter(ctx context.Context, voucher domain.VoucherID, after domain.OrderID, limit int) ([]domain.VoucherOrder, error) {
	all, err := s.Buyers(ctx, voucher)
	if err != nil {
		return nil, err
	}
	i, _ := slices.BinarySearchFunc(all, after+1, func(o domain.VoucherOrder, id domain.OrderID) int { return cmp.Compare(o.ID(), id) })
	all = all[i:]
	return all[:min(limit, len(all))], nil
}

func (s *Orders) CountBuyers(ctx context.Context, vouchers []domain.VoucherID) (map[domain.VoucherID]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[domain.VoucherID]int, len(vouchers))
	for _, v := range vouchers {
		out[v] = 0 // a voucher without buyers counts them too
		for _, ids := range s.places[v] {
			out[v] += len(ids)
		}
	}
	return out, nil
}

// placesHeld is the slots of the places the orders' users hold in their
// vouchers' sales (the SQL unique key's rows); the caller holds s.mu.
func (s *Orders) placesHeld(orders []domain.VoucherOrder) map[domain.VoucherID]map[domain.UserID][]int {
	out := map[domain.VoucherID]map[domain.UserID][]int{}
	for _, o := range orders {
		v, u := o.VoucherID(), o.UserID()
		if out[v] == nil {
			out[v] = map[domain.UserID][]int{}
		}
		if _, done := out[v][u]; done {
			continue
		}
		slots := []int{}
		for _, id := range s.places[v][u] {
			slots = append(slots, s.created[id].slot)
		}
		out[v][u] = slots
	}
	return out
}

var _ ports.OrderLedger = (*Orders)(nil)

// Tally counts as the SQL repository does; it walks every order, which is
// fine for the small fakes of tests.
func (s *Orders) Tally(ctx context.Context, id domain.VoucherID) (ports.SaleTally, error) {
	if err := ctx.Err(); err != nil {
		return ports.SaleTally{}, err
	}
	stock, _, ok := s.vouchers.saleOf(id)
	if !ok {
		return ports.SaleTally{}, domain.ErrVoucherNotFound
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := ports.SaleTally{Stock: stock}
	for _, l := range s.created {
		if l.order.VoucherID() != id {
			continue
		}
		switch l.state {
		case domain.OrderCreated:
			t.Unpaid++
		case domain.OrderPaid:
			t.Paid++
		case domain.OrderCancelled:
			t.Cancelled++
		case domain.OrderRefunding:
			t.Refunding++
		}
	}
	for _, f := range s.failed {
		if f.order.VoucherID() == id {
			t.Failed++
		}
	}
	s.tallyPayments(id, &t)
	return t, nil
}

var _ ports.SaleOrders = (*Orders)(nil)

// OrdersAfter walks every created order, which is fine for the small fakes
// of tests; the SQL repository reads one index range per page.
func (s *Orders) OrdersAfter(ctx context.Context, voucher domain.VoucherID, filter domain.OrderFilter, after domain.OrderID, limit int) ([]domain.OrderStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []domain.OrderStatus{}
	for id, l := range s.created {
		if l.order.VoucherID() != voucher || id <= after {
			continue
		}
		if st, _ := s.recorded(id); filter.Matches(st) {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b domain.OrderStatus) int { return cmp.Compare(a.Order.ID(), b.Order.ID()) })
	return out[:min(max(limit, 0), len(out))], nil
}
