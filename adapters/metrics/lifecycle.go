package metrics

import (
	"context"
	"slices"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Buckets of the expiry lag: an order is expired within 5 s of its deadline
// (the loop runs every second), a backlog shows as tens of seconds or more.
var expiryLagBuckets = []float64{.1, .25, .5, 1, 2, 3, 5, 10, 30, 60, 300}

// paymentKinds is the closed label set of seckill_payments_total.
var paymentKinds = []domain.PaymentKind{domain.PaymentSettled, domain.PaymentLate, domain.PaymentDouble, domain.PaymentUnsold}

// OrderLifecycle counts what the order lifecycle it wraps commits (issue
// 25): orders expired and how long after their deadline, units given back
// to the gate, and payments received by kind (a late payment is money that
// arrived after the order was cancelled, a double charge a second
// transaction for a paid order: both are owed back).
type OrderLifecycle struct {
	ports.OrderLifecycle
	m *Metrics
}

var _ ports.OrderLifecycle = (*OrderLifecycle)(nil)

// OrderLifecycle wraps next.
func (m *Metrics) OrderLifecycle(next ports.OrderLifecycle) *OrderLifecycle {
	if next == nil {
		panic("metrics: OrderLifecycle needs a non-nil ports.OrderLifecycle")
	}
	return &OrderLifecycle{OrderLifecycle: next, m: m}
}

func (l *OrderLifecycle) ExpireDue(ctx context.Context, now time.Time, limit int) ([]ports.ExpiredOrder, error) {
	due, err := l.OrderLifecycle.ExpireDue(ctx, now, limit)
	if err != nil {
		return due, err
	}
	l.m.expired.Add(float64(len(due)))
	for _, d := range due {
		l.m.expiryLag.Observe(max(now.Sub(d.Deadline), 0).Seconds())
	}
	return due, nil
}

func (l *OrderLifecycle) Returned(ctx context.Context, ids []domain.OrderID) error {
	if err := l.OrderLifecycle.Returned(ctx, ids); err != nil {
		return err
	}
	l.m.returned.Add(float64(len(ids)))
	return nil
}

func (l *OrderLifecycle) Pay(ctx context.Context, p domain.Payment) (ports.PayResult, error) {
	res, err := l.OrderLifecycle.Pay(ctx, p)
	if err == nil && res.New && slices.Contains(paymentKinds, res.Kind) {
		l.m.payments.WithLabelValues(string(res.Kind)).Inc()
	}
	return res, err
}
