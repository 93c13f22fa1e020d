package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	expired  prometheus.Counter
	returned prometheus.Counter
	lag      prometheus.Histogram
	payments map[domain.PaymentKind]prometheus.Counter
}

var _ ports.OrderLifecycle = (*OrderLifecycle)(nil)

// OrderLifecycle registers the lifecycle's instruments on m's registry and
// wraps next; call it once.
func (m *Metrics) OrderLifecycle(next ports.OrderLifecycle) *OrderLifecycle {
	if next == nil {
		panic("metrics: OrderLifecycle needs a non-nil ports.OrderLifecycle")
	}
	f := factory{m.reg}
	l := &OrderLifecycle{
		OrderLifecycle: next,
		expired: f.counter(prometheus.CounterOpts{
			Name: "orders_expired_total",
			Help: "Unpaid orders this instance cancelled because their pay window passed.",
		}),
		returned: f.counter(prometheus.CounterOpts{
			Name: "units_returned_total",
			Help: "Units of cancelled orders (expired or by their buyer) this instance gave back to the gate.",
		}),
		lag: f.histogram(prometheus.HistogramOpts{
			Name:    "order_expiry_lag_seconds",
			Help:    "How long after its pay deadline each order was expired.",
			Buckets: expiryLagBuckets,
		}),
		payments: map[domain.PaymentKind]prometheus.Counter{},
	}
	vec := f.counterVec(prometheus.CounterOpts{
		Name: "payments_total",
		Help: "Payments received, once per provider transaction, by kind: settled, late (after the order was cancelled), double (another transaction for a paid order), unsold (for a failed order); all but settled are owed back.",
	}, "kind")
	for _, k := range paymentKinds {
		l.payments[k] = vec.WithLabelValues(string(k))
	}
	return l
}

func (l *OrderLifecycle) ExpireDue(ctx context.Context, now time.Time, limit int) ([]ports.ExpiredOrder, error) {
	due, err := l.OrderLifecycle.ExpireDue(ctx, now, limit)
	if err != nil {
		return due, err
	}
	l.expired.Add(float64(len(due)))
	for _, d := range due {
		l.lag.Observe(max(now.Sub(d.Deadline), 0).Seconds())
	}
	return due, nil
}

func (l *OrderLifecycle) Returned(ctx context.Context, ids []domain.OrderID) error {
	if err := l.OrderLifecycle.Returned(ctx, ids); err != nil {
		return err
	}
	l.returned.Add(float64(len(ids)))
	return nil
}

func (l *OrderLifecycle) Pay(ctx context.Context, p domain.Payment) (ports.PayResult, error) {
	res, err := l.OrderLifecycle.Pay(ctx, p)
	if err == nil && res.New {
		if c, ok := l.payments[res.Kind]; ok {
			c.Inc()
		}
	}
	return res, err
}
