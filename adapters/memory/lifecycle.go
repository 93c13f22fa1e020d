package memory

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var _ ports.OrderLifecycle = (*Orders)(nil)

// orderLife is a created order with its slot among its buyer's places and
// its lifecycle, as tb_voucher_order's slot, status, pay_deadline,
// cancel_reason, pay_time and returned columns keep it.
type orderLife struct {
	order domain.VoucherOrder
	slot  int
	state domain.OrderState
	domain.Lifecycle
	transactionID string
	returned      bool
}

// WithReclaimAfterCancel sets whether an order cancelled from now on frees
// its buyer to claim again (mysqlstore.OrderRepo.WithReclaimAfterCancel)
// and returns s.
func (s *Orders) WithReclaimAfterCancel(on bool) *Orders {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reclaim = on
	return s
}

// WithPayWindow sets the pay window of the orders CreateBatch records from
// now on (0, the default, never expires them) and returns s.
func (s *Orders) WithPayWindow(window time.Duration) *Orders {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.window = window
	return s
}

// ExpireDue holds the mutex for the whole pass, as the SQL transaction holds
// its rows.
func (s *Orders) ExpireDue(ctx context.Context, now time.Time, limit int) ([]ports.ExpiredOrder, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []ports.ExpiredOrder
	for _, l := range s.created {
		if l.state == domain.OrderCreated && !l.PayDeadline.IsZero() && !l.PayDeadline.After(now) {
			due = append(due, ports.ExpiredOrder{Order: l.order, Deadline: l.PayDeadline})
		}
	}
	slices.SortFunc(due, func(a, b ports.ExpiredOrder) int { return cmp.Compare(a.Order.ID(), b.Order.ID()) })
	due = due[:min(limit, len(due))]
	for _, d := range due {
		s.cancel(d.Order, domain.CancelExpired)
	}
	return due, nil
}

// cancel moves a created order to cancelled and its unit back to stock; the
// caller holds s.mu.
func (s *Orders) cancel(o domain.VoucherOrder, reason domain.CancelReason) {
	l := s.created[o.ID()]
	l.state, l.CancelReason = domain.OrderCancelled, reason
	// Unless reclaim frees it, the place is forfeited: it keeps counting
	// toward the buyer's limit, and its slot stays taken.
	if s.reclaim {
		v, u := o.VoucherID(), o.UserID()
		if held := slices.DeleteFunc(s.places[v][u], func(id domain.OrderID) bool { return id == o.ID() }); len(held) > 0 {
			s.places[v][u] = held
		} else {
			delete(s.places[v], u)
		}
	}
	s.vouchers.take(o.VoucherID(), -1)
}

func (s *Orders) Unreturned(ctx context.Context, limit int) ([]domain.VoucherOrder, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []domain.VoucherOrder
	for _, l := range s.created {
		if !l.state.HoldsUnit() && !l.returned {
			out = append(out, l.order)
		}
	}
	slices.SortFunc(out, func(a, b domain.VoucherOrder) int { return cmp.Compare(a.ID(), b.ID()) })
	return out[:min(limit, len(out))], nil
}

func (s *Orders) Returned(ctx context.Context, ids []domain.OrderID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if l, ok := s.created[id]; ok && !l.state.HoldsUnit() {
			l.returned = true
		}
	}
	return nil
}

func (s *Orders) Cancel(ctx context.Context, id domain.OrderID) (domain.OrderStatus, bool, error) {
	if err := ctx.Err(); err != nil {
		return domain.OrderStatus{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.recorded(id)
	if !ok {
		return domain.OrderStatus{}, false, domain.ErrOrderNotFound
	}
	if _, changed, err := st.State.AfterCancel(); err != nil || !changed {
		return st, false, err
	}
	s.cancel(st.Order, domain.CancelByBuyer)
	st, _ = s.recorded(id)
	return st, true, nil
}

// payment is one received payment, as a tb_payment row keeps it.
type payment struct {
	domain.Payment
	kind domain.PaymentKind
}

// Pay records the payment and changes the order under one hold of the
// mutex, as the SQL repository does in one transaction.
func (s *Orders) Pay(ctx context.Context, p domain.Payment) (ports.PayResult, error) {
	if err := ctx.Err(); err != nil {
		return ports.PayResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := p.Order.ID()
	st, ok := s.recorded(id)
	if !ok {
		return ports.PayResult{}, domain.ErrOrderNotFound
	}
	if seen, ok := s.payments[p.TransactionID]; ok {
		if seen.Order.ID() != id {
			return ports.PayResult{}, domain.ErrTransactionReused
		}
		return ports.PayResult{Status: st, Kind: seen.kind}, nil
	}
	kind, next, err := st.State.Pay()
	if err != nil {
		return ports.PayResult{}, err
	}
	if next != st.State {
		l := s.created[id]
		l.state, l.PaidAt, l.transactionID = next, p.At.UTC().Truncate(time.Microsecond), p.TransactionID
	}
	p.Order = st.Order
	s.payments[p.TransactionID] = payment{Payment: p, kind: kind}
	st, _ = s.recorded(id)
	return ports.PayResult{Status: st, Kind: kind, New: true}, nil
}

// tallyPayments adds the voucher's payments owed back to t; the caller
// holds s.mu.
func (s *Orders) tallyPayments(id domain.VoucherID, t *ports.SaleTally) {
	for _, p := range s.payments {
		if p.Order.VoucherID() != id || !p.kind.Owed() {
			continue
		}
		t.RefundsOwed++
		t.RefundsOwedFen += p.Amount
		if p.kind == domain.PaymentDouble {
			t.DoubleCharges++
		}
	}
}
