// Package chanqueue is the OrderQueue over a bounded Go channel, in this
// process's memory: delivery is at most once, and orders queued when the
// process dies are lost (`seckill reconcile` repairs Redis from MySQL).
package chanqueue

import (
	"context"
	"sync"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Queue is safe for concurrent Publish, Receive, Ack and Close.
type Queue struct {
	ch     chan domain.VoucherOrder
	linger time.Duration
	// Publish holds mu shared while it sends, Close exclusively while it
	// closes the channel, so no send can hit a closed channel.
	mu     sync.RWMutex
	closed bool
}

var _ ports.OrderQueue = (*Queue)(nil)

// New returns a queue of at most capacity orders; Receive waits up to linger
// after the first order for a batch to fill.
func New(capacity int, linger time.Duration) *Queue {
	if capacity <= 0 {
		panic("chanqueue: capacity must be positive")
	}
	return &Queue{ch: make(chan domain.VoucherOrder, capacity), linger: linger}
}

// Publish never blocks: a full queue answers ports.ErrQueueFull, so a
// stampede sheds load instead of piling up goroutines.
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

var _ ports.QueueMonitor = (*Queue)(nil)

// Overview: the channel is this instance's whole backlog; it keeps no dead
// letters (what fulfilment gives up on is recorded as failed in the database).
func (q *Queue) Overview(context.Context) (ports.QueueOverview, error) {
	return ports.QueueOverview{Kind: "channel", Length: int64(q.Len()), DeadLetters: -1}, nil
}

// Backlog is not kept per voucher.
func (q *Queue) Backlog(context.Context, domain.VoucherID) (ports.Backlog, error) {
	return ports.Backlog{}, nil
}
