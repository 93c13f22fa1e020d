package metrics

import (
	"context"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Worker stages a retry can happen in.
const (
	StageReceive = "receive"
	StageFulfil  = "fulfil"
)

// WorkerRetried is the worker's retry hook: it counts the retry and the
// backoff about to be slept.
func (m *Metrics) WorkerRetried(stage string, backoff time.Duration) {
	if stage != StageReceive {
		stage = StageFulfil // a closed label set whatever the worker calls it
	}
	m.retries.WithLabelValues(stage).Inc()
	m.backoff.WithLabelValues(stage).Add(backoff.Seconds())
}

// OrderRepository counts what the repository it wraps commits: batch sizes
// and durations, orders newly written, and each new order's claim-to-commit
// time. Reads pass through.
type OrderRepository struct {
	ports.OrderRepository
	m *Metrics
}

var _ ports.OrderRepository = (*OrderRepository)(nil)

// OrderRepository wraps next.
func (m *Metrics) OrderRepository(next ports.OrderRepository) *OrderRepository {
	if next == nil {
		panic("metrics: OrderRepository needs a non-nil ports.OrderRepository")
	}
	return &OrderRepository{OrderRepository: next, m: m}
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
	if created > 0 {
		m.ordersWritten.WithLabelValues("created").Add(float64(created))
	}
	if failed > 0 {
		m.ordersWritten.WithLabelValues("failed").Add(float64(failed))
	}
}

// OrderQueue counts the dead letters of the queue it wraps, by reason.
// Entries a queue sets aside on its own (a stream's undecodable entries) do
// not pass here: the stream collector reports the dead-letter stream's length.
type OrderQueue struct {
	ports.OrderQueue
	m *Metrics
}

var _ ports.OrderQueue = (*OrderQueue)(nil)

// OrderQueue wraps next.
func (m *Metrics) OrderQueue(next ports.OrderQueue) *OrderQueue {
	if next == nil {
		panic("metrics: OrderQueue needs a non-nil ports.OrderQueue")
	}
	return &OrderQueue{OrderQueue: next, m: m}
}

func (q *OrderQueue) DeadLetter(ctx context.Context, ds []ports.Delivery, reason domain.FailureReason) error {
	err := q.OrderQueue.DeadLetter(ctx, ds, reason)
	if err == nil && len(ds) > 0 {
		q.m.deadLetters.WithLabelValues(string(reason)).Add(float64(len(ds)))
	}
	return err
}
