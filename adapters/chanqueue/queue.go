// Package chanqueue is the OrderQueue over a bounded Go channel, in this
// process's memory: delivery is at most once, and orders queued when the
// process dies are lost (`seckill reconcile` repairs Redis from MySQL).
package chanqueue

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Queue is safe for concurrent Publish, Receive, Ack and Close.
type Queue struct {
	ch     chan domain.VoucherOrder
	linger time.Duration
	mu     sync.RWMutex // Publish sends under it shared, Close closes the channel under it exclusively
	closed bool
}

var (
	_ ports.OrderQueue   = (*Queue)(nil)
	_ ports.QueueMonitor = (*Queue)(nil)
	_ ports.Admission    = (*Admission)(nil)
)

// New returns a queue of at most capacity orders; Receive waits up to linger
// after the first order for a batch to fill.
func New(capacity int, linger time.Duration) *Queue {
	if capacity <= 0 {
		panic("chanqueue: capacity must be positive")
	}
	return &Queue{ch: make(chan domain.VoucherOrder, capacity), linger: linger}
}

// Publish never blocks: a full queue answers ports.ErrQueueFull, so a stampede sheds load.
func (q *Queue) Publish(_ context.Context, o domain.VoucherOrder) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return ports.ErrQueueClosed
	}
	select {
	case q.ch <- o:
		return nil
	default:
		return ports.ErrQueueFull
	}
}

// Receive blocks for the first order, then takes what is already queued and
// what arrives within the linger, up to max.
func (q *Queue) Receive(ctx context.Context, max int) ([]ports.Delivery, error) {
	if max <= 0 {
		max = 1
	}
	var batch []ports.Delivery
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case o, ok := <-q.ch:
		if !ok {
			return nil, ports.ErrQueueClosed
		}
		batch = append(make([]ports.Delivery, 0, max), ports.Delivery{Order: o, Attempts: 1})
	}
	var timeout <-chan time.Time
	if q.linger > 0 {
		t := time.NewTimer(q.linger)
		defer t.Stop()
		timeout = t.C
	}
	for len(batch) < max {
		var o domain.VoucherOrder
		ok := false
		// What is queued already is taken first, even once the linger or ctx is over.
		select {
		case o, ok = <-q.ch:
		default:
			if timeout == nil {
				return batch, nil
			}
			select {
			case o, ok = <-q.ch:
			case <-timeout:
			case <-ctx.Done(): // what was taken is handed over, not dropped
			}
		}
		if !ok {
			return batch, nil
		}
		batch = append(batch, ports.Delivery{Order: o, Attempts: 1})
	}
	return batch, nil
}

// Ack does nothing: a channel forgets an order once it is received.
func (q *Queue) Ack(context.Context, []ports.Delivery) error { return nil }

// DeadLetter does nothing: a channel never hands an order out twice.
func (q *Queue) DeadLetter(context.Context, []ports.Delivery, domain.FailureReason) error { return nil }

// Close stops Publish; Receive drains what is left, then returns ErrQueueClosed.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
	return nil
}

// Len is how many orders wait in the channel (the queue-depth gauge).
func (q *Queue) Len() int { return len(q.ch) }

// Overview: the channel is this instance's whole backlog; it keeps no dead letters.
func (q *Queue) Overview(context.Context) (ports.QueueOverview, error) {
	return ports.QueueOverview{Kind: "channel", Length: int64(q.Len()), DeadLetters: -1}, nil
}

// Backlog is not kept per voucher.
func (q *Queue) Backlog(context.Context, domain.VoucherID) (ports.Backlog, error) {
	return ports.Backlog{}, nil
}

// Admission is the channel driver's ports.Admission: the gate reserves, then the order goes on
// the channel; whenever it is not on the channel at the end, its reservation is released.
type Admission struct {
	gate  ports.StockGate
	queue *Queue
}

// releaseBudget bounds a rollback; its own, because the claim's may be what ran out.
const releaseBudget = 2 * time.Second

// NewAdmission takes the channel queue itself: only the queue the worker drains may carry what this gate reserved.
func NewAdmission(gate ports.StockGate, queue *Queue) *Admission {
	if gate == nil || queue == nil {
		panic("chanqueue: NewAdmission needs a gate and a queue")
	}
	return &Admission{gate: gate, queue: queue}
}

// Admit reserves, then publishes; on an ambiguous reserve or a failed publish
// it releases by order ID and answers ports.ErrNotAdmitted. When ctx ran out the
// release runs in the background (the gate orders it after a late reserve). A
// failed release leaves a unit without an order, never the reverse, until reconcile.
func (a *Admission) Admit(ctx context.Context, o domain.VoucherOrder) error {
	err := a.gate.Reserve(ctx, o)
	switch {
	case err == nil:
	case domain.IsRefusal(err):
		return err
	case ctx.Err() != nil:
		go func() { _ = a.release(ctx, o) }()
		return fmt.Errorf("reserve %s (released in the background): %w: %w", o, ports.ErrNotAdmitted, err)
	default:
		if rerr := a.release(ctx, o); rerr != nil {
			return fmt.Errorf("reserve %s: %w: %w (release after ambiguous reserve also failed, reconcile needed: %v)", o, ports.ErrNotAdmitted, err, rerr)
		}
		return fmt.Errorf("reserve %s (released): %w: %w", o, ports.ErrNotAdmitted, err)
	}
	if err := a.queue.Publish(ctx, o); err != nil {
		if rerr := a.release(ctx, o); rerr != nil {
			return fmt.Errorf("publish %s: %w: %w (rollback failed, reconcile needed: %v)", o, ports.ErrNotAdmitted, err, rerr)
		}
		return fmt.Errorf("publish %s: %w: %w", o, ports.ErrNotAdmitted, err)
	}
	return nil
}

func (a *Admission) release(ctx context.Context, o domain.VoucherOrder) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseBudget)
	defer cancel()
	return a.gate.Release(ctx, o, true)
}
