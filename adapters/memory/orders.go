package memory

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var _ ports.OrderRepository = (*Orders)(nil)

// Orders is the in-memory OrderRepository. It classifies a batch with the same
// rules as mysqlstore.OrderRepo, and holding its mutex for the whole batch
// plays the part of the SQL transaction and the stock-row lock. It is the only
// writer of its Vouchers' stock: build one Orders per Vouchers.
type Orders struct {
	vouchers *Vouchers

	mu      sync.Mutex
	created map[domain.OrderID]domain.VoucherOrder
	failed  map[domain.OrderID]orderFailure
	holders map[domain.VoucherID]map[domain.UserID]domain.OrderID
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
		created:  map[domain.OrderID]domain.VoucherOrder{},
		failed:   map[domain.OrderID]orderFailure{},
		holders:  map[domain.VoucherID]map[domain.UserID]domain.OrderID{},
	}
}

// CreateBatch decides every outcome first and only then changes anything, so
// like the SQL repository it either records the whole batch or nothing.
func (s *Orders) CreateBatch(ctx context.Context, orders []domain.VoucherOrder) ([]ports.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	outcomes := make([]ports.Outcome, 0, len(orders))
	stock := map[domain.VoucherID]int{}
	hasSale := map[domain.VoucherID]bool{}
	taken := map[domain.VoucherID]int{}
	batchHolders := map[domain.VoucherID]map[domain.UserID]bool{}
	var accepted []domain.VoucherOrder
	var failures []ports.Outcome
	first := map[domain.OrderID]int{}

	fail := func(o domain.VoucherOrder, reason domain.FailureReason, record bool) ports.Outcome {
		out := ports.Outcome{Order: o, State: domain.OrderFailed, Reason: reason, New: true}
		if record {
			failures = append(failures, out)
		}
		return out
	}
	for _, o := range orders {
		var out ports.Outcome
		if i, seen := first[o.ID()]; seen {
			if outcomes[i].Order == o {
				out = outcomes[i]
				out.New = false
			} else {
				out = fail(o, domain.FailIDConflict, false)
			}
			outcomes = append(outcomes, out)
			continue
		}
		first[o.ID()] = len(outcomes)

		v, u := o.VoucherID(), o.UserID()
		if _, known := hasSale[v]; !known {
			stock[v], hasSale[v] = s.vouchers.stockOf(v)
		}
		_, holds := s.holders[v][u]
		if c, ok := s.created[o.ID()]; ok {
			if c == o {
				out = ports.Outcome{Order: o, State: domain.OrderCreated}
			} else {
				out = fail(o, domain.FailIDConflict, false)
			}
		} else if f, ok := s.failed[o.ID()]; ok {
			if f.order == o {
				out = ports.Outcome{Order: o, State: domain.OrderFailed, Reason: f.reason}
			} else {
				out = fail(o, domain.FailIDConflict, false)
			}
		} else if !hasSale[v] {
			out = fail(o, domain.FailVoucherGone, true)
		} else if holds || batchHolders[v][u] {
			out = fail(o, domain.FailDuplicate, true)
		} else if stock[v] <= 0 {
			out = fail(o, domain.FailOutOfStock, true)
		} else {
			stock[v]--
			taken[v]++
			if batchHolders[v] == nil {
				batchHolders[v] = map[domain.UserID]bool{}
			}
			batchHolders[v][u] = true
			accepted = append(accepted, o)
			out = ports.Outcome{Order: o, State: domain.OrderCreated, New: true}
		}
		outcomes = append(outcomes, out)
	}

	for v, n := range taken {
		s.vouchers.take(v, n)
	}
	for _, o := range accepted {
		s.created[o.ID()] = o
		if s.holders[o.VoucherID()] == nil {
			s.holders[o.VoucherID()] = map[domain.UserID]domain.OrderID{}
		}
		s.holders[o.VoucherID()][o.UserID()] = o.ID()
	}
	for _, f := range failures {
		s.failed[f.Order.ID()] = orderFailure{order: f.Order, reason: f.Reason}
	}
	return outcomes, nil
}

// MarkFailed holds the same mutex as CreateBatch, so the two never both
// record one order.
func (s *Orders) MarkFailed(ctx context.Context, orders []domain.VoucherOrder, reason domain.FailureReason) ([]ports.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	outcomes := make([]ports.Outcome, 0, len(orders))
	for _, o := range orders {
		out := ports.Outcome{Order: o, State: domain.OrderFailed, Reason: reason}
		if st, ok := s.recorded(o.ID()); ok {
			out.State, out.Reason = st.Redelivery(o)
			out.New = out.Reason == domain.FailIDConflict
		} else {
			out.New = true
			s.failed[o.ID()] = orderFailure{order: o, reason: reason}
		}
		outcomes = append(outcomes, out)
	}
	return outcomes, nil
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
	if o, ok := s.created[id]; ok {
		return domain.OrderStatus{Order: o, State: domain.OrderCreated}, true
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
	buyers := make([]domain.VoucherOrder, 0, len(s.holders[voucher]))
	for _, id := range s.holders[voucher] {
		buyers = append(buyers, s.created[id])
	}
	slices.SortFunc(buyers, func(a, b domain.VoucherOrder) int { return cmp.Compare(a.ID(), b.ID()) })
	return buyers, nil
}
