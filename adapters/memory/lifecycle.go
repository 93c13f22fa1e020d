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

// orderLife is a created order's lifecycle, as tb_voucher_order's status,
// pay_deadline, cancel_reason, pay_time and returned columns keep it.
type orderLife struct {
	state domain.OrderState
	domain.Lifecycle
	transactionID string
	returned      bool
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
func (s *Orders) ExpireDue(ctx context.Context, now time.Time, limit int) ([]domain.VoucherOrder, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []domain.VoucherOrder
	for id, l := range s.life {
		if l.state == domain.OrderCreated && !l.PayDeadline.IsZero() && !l.PayDeadline.After(now) {
			due = append(due, s.created[id])
		}
	}
	slices.SortFunc(due, func(a, b domain.VoucherOrder) int { return cmp.Compare(a.ID(), b.ID()) })
	due = due[:min(limit, len(due))]
	for _, o := range due {
		s.cancel(o, domain.CancelExpired)
	}
	return due, nil
}

// cancel moves a created order to cancelled and its unit back to stock; the
// caller holds s.mu.
func (s *Orders) cancel(o domain.VoucherOrder, reason domain.CancelReason) {
	l := s.life[o.ID()]
	l.state, l.CancelReason = domain.OrderCancelled, reason
	delete(s.holders[o.VoucherID()], o.UserID())
	s.vouchers.take(o.VoucherID(), -1)
}

func (s *Orders) Unreturned(ctx context.Context, limit int) ([]domain.VoucherOrder, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []domain.VoucherOrder
	for id, l := range s.life {
		if !l.state.HoldsUnit() && !l.returned {
			out = append(out, s.created[id])
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
		if l, ok := s.life[id]; ok && !l.state.HoldsUnit() {
			l.returned = true
		}
	}
	return nil
}

func (s *Orders) Cancel(ctx context.Context, id domain.OrderID) (domain.OrderStatus, bool, error) {
	return s.transition(ctx, id, func(st domain.OrderStatus) (bool, error) {
		if _, changed, err := st.State.AfterCancel(); err != nil || !changed {
			return false, err
		}
		s.cancel(st.Order, domain.CancelByBuyer)
		return true, nil
	})
}

func (s *Orders) Pay(ctx context.Context, id domain.OrderID, transactionID string, at time.Time) (domain.OrderStatus, bool, error) {
	return s.transition(ctx, id, func(st domain.OrderStatus) (bool, error) {
		next, changed, err := st.State.AfterPayment()
		if err != nil || !changed {
			return false, err
		}
		l := s.life[id]
		l.state, l.PaidAt, l.transactionID = next, at.UTC().Truncate(time.Microsecond), transactionID
		return true, nil
	})
}

// transition applies apply to the recorded order under the mutex and
// answers its status after.
func (s *Orders) transition(ctx context.Context, id domain.OrderID, apply func(domain.OrderStatus) (bool, error)) (domain.OrderStatus, bool, error) {
	if err := ctx.Err(); err != nil {
		return domain.OrderStatus{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.recorded(id)
	if !ok {
		return domain.OrderStatus{}, false, domain.ErrOrderNotFound
	}
	changed, err := apply(st)
	if err != nil {
		return st, false, err
	}
	st, _ = s.recorded(id)
	return st, changed, nil
}
