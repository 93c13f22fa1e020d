package metrics

import (
	"context"
	"reflect"
	"slices"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

const (
	StageReceive = "receive"
	StageFulfil  = "fulfil"
)

// WorkerRetried is the worker's retry hook: it counts the retry and the
// backoff about to be slept.
func (m *Metrics) WorkerRetried(stage string, backoff time.Duration) {
	if stage != StageReceive {
		stage = StageFulfil // a closed label set
	}
	m.retries.WithLabelValues(stage).Inc()
	m.backoff.WithLabelValues(stage).Add(backoff.Seconds())
}

// OrderRepository counts what the repository it wraps commits: batch sizes
// and durations, orders newly written, each one's claim-to-commit time.
type OrderRepository struct {
	ports.OrderRepository
	m *Metrics
}

func (m *Metrics) OrderRepository(next ports.OrderRepository) *OrderRepository {
	return &OrderRepository{must(next), m}
}

func (r *OrderRepository) CreateBatch(ctx context.Context, orders []domain.VoucherOrder) ([]ports.Outcome, error) {
	start := time.Now()
	out, err := r.OrderRepository.CreateBatch(ctx, orders)
	if err != nil {
		return out, err // nothing committed; the worker's retry hook counts it
	}
	now := time.Now()
	r.m.batchSize.Observe(float64(len(orders)))
	r.m.batchSeconds.Observe(now.Sub(start).Seconds())
	r.m.written(out, now)
	return out, nil
}

func (r *OrderRepository) MarkFailed(ctx context.Context, orders []domain.VoucherOrder, reason domain.FailureReason) ([]ports.Outcome, error) {
	out, err := r.OrderRepository.MarkFailed(ctx, orders, reason)
	if err == nil {
		r.m.written(out, time.Now())
	}
	return out, err
}

func (m *Metrics) written(out []ports.Outcome, now time.Time) {
	var created, failed int
	for _, o := range out {
		if !o.New {
			continue
		}
		if o.State == domain.OrderCreated {
			created++
			m.claimToCommit.Observe(now.Sub(o.Order.ID().Time()).Seconds())
		} else {
			failed++
		}
	}
	m.ordersWritten.WithLabelValues("created").Add(float64(created))
	m.ordersWritten.WithLabelValues("failed").Add(float64(failed))
}

// must panics on a nil next: a wiring mistake, told at the start rather than
// at the first call.
func must[P any](next P) P {
	if any(next) == nil {
		panic("metrics: a decorator needs a non-nil " + reflect.TypeFor[P]().String())
	}
	return next
}

// OrderQueue counts the dead letters of the queue it wraps, by reason (not
// those a queue sets aside on its own: see the stream collector).
type OrderQueue struct {
	ports.OrderQueue
	m *Metrics
}

func (m *Metrics) OrderQueue(next ports.OrderQueue) *OrderQueue { return &OrderQueue{must(next), m} }

func (q *OrderQueue) DeadLetter(ctx context.Context, ds []ports.Delivery, reason domain.FailureReason) error {
	err := q.OrderQueue.DeadLetter(ctx, ds, reason)
	if err == nil && len(ds) > 0 {
		q.m.deadLetters.WithLabelValues(string(reason)).Add(float64(len(ds)))
	}
	return err
}

var paymentKinds = []string{string(domain.PaymentSettled), string(domain.PaymentLate), string(domain.PaymentDouble), string(domain.PaymentUnsold)}

// OrderLifecycle counts what the order lifecycle it wraps commits: orders
// expired and how late, units given back to the gate, payments by kind.
type OrderLifecycle struct {
	ports.OrderLifecycle
	m *Metrics
}

func (m *Metrics) OrderLifecycle(next ports.OrderLifecycle) *OrderLifecycle {
	return &OrderLifecycle{must(next), m}
}

func (l *OrderLifecycle) ExpireDue(ctx context.Context, now time.Time, limit int) ([]ports.ExpiredOrder, error) {
	due, err := l.OrderLifecycle.ExpireDue(ctx, now, limit)
	if err == nil {
		l.m.expired.Add(float64(len(due)))
		for _, d := range due {
			l.m.expiryLag.Observe(max(now.Sub(d.Deadline), 0).Seconds())
		}
	}
	return due, err
}

func (l *OrderLifecycle) Returned(ctx context.Context, ids []domain.OrderID) error {
	err := l.OrderLifecycle.Returned(ctx, ids)
	if err == nil {
		l.m.returned.Add(float64(len(ids)))
	}
	return err
}

func (l *OrderLifecycle) Pay(ctx context.Context, p domain.Payment) (ports.PayResult, error) {
	res, err := l.OrderLifecycle.Pay(ctx, p)
	if err == nil && res.New && slices.Contains(paymentKinds, string(res.Kind)) {
		l.m.payments.WithLabelValues(string(res.Kind)).Inc()
	}
	return res, err
}
