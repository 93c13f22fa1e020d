// Package worker moves claimed orders from the queue into the database: it
// receives batches, runs FulfillOrders, and acks a batch only after its
// transaction committed. A failed batch is retried with capped backoff, never skipped.
package worker

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Options tune a Worker; zero values take the defaults.
type Options struct {
	BatchSize  int           // most orders per transaction (default 200)
	MinBackoff time.Duration // first retry delay (default 50ms)
	MaxBackoff time.Duration // retry delay cap (default 5s)
	// MaxDeliveries: an order delivered more often is recorded as failed and dead-lettered (0: no limit).
	MaxDeliveries int
	// Retried, when set, is told of each retry (stage "receive" or "fulfil") before its backoff.
	Retried func(stage string, backoff time.Duration)
}

// Worker drains one OrderQueue. Several may run on one queue.
type Worker struct {
	queue   ports.OrderQueue
	fulfill *application.FulfillOrders
	log     zerolog.Logger
	opts    Options
}

func New(queue ports.OrderQueue, fulfill *application.FulfillOrders, log zerolog.Logger, opts Options) *Worker {
	if queue == nil || fulfill == nil {
		panic("worker: queue and fulfill are required")
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 200
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 50 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(5*time.Second, opts.MinBackoff)
	}
	return &Worker{queue: queue, fulfill: fulfill, log: log, opts: opts}
}

// Run drains the queue until it is closed and empty (returns nil) or ctx ends
// (returns ctx.Err(); a batch being retried is abandoned and logged).
func (w *Worker) Run(ctx context.Context) error {
	backoff := w.opts.MinBackoff
	for {
		ds, err := w.queue.Receive(ctx, w.opts.BatchSize)
		switch {
		case errors.Is(err, ports.ErrQueueClosed):
			return nil
		case ctx.Err() != nil && len(ds) == 0:
			return ctx.Err()
		case err != nil:
			w.log.Error().Err(err).Dur("retry_in", backoff).Msg("receive from order queue failed")
			if !w.backOff(ctx, "receive", &backoff) {
				return ctx.Err()
			}
			continue
		}
		backoff = w.opts.MinBackoff
		if err := w.process(ctx, ds); err != nil {
			return err
		}
	}
}

// process rejects and dead-letters orders delivered too often, and writes and acks the rest.
func (w *Worker) process(ctx context.Context, ds []ports.Delivery) error {
	var fresh, spent []ports.Delivery
	for _, d := range ds {
		if w.opts.MaxDeliveries > 0 && d.Attempts > w.opts.MaxDeliveries {
			spent = append(spent, d)
		} else {
			fresh = append(fresh, d)
		}
	}
	if len(spent) > 0 {
		// Reject keeps an outcome the database has: an order created earlier is acked, not dead-lettered.
		res, err := w.settle(ctx, spent, func(ctx context.Context, orders []domain.VoucherOrder) (application.BatchResult, error) {
			return w.fulfill.Reject(ctx, orders, domain.FailUndeliverable)
		})
		if err != nil {
			return err
		}
		w.logSpent(spent, res)
	}
	if len(fresh) == 0 {
		return nil
	}
	_, err := w.settle(ctx, fresh, w.fulfill.Handle)
	return err
}

// confirm acks the created orders' deliveries and dead-letters, by reason,
// those the database refused for good (recorded as failed already).
func (w *Worker) confirm(ctx context.Context, ds []ports.Delivery, res application.BatchResult) error {
	reasons := make(map[domain.OrderID]domain.FailureReason, len(res.Failed))
	for _, f := range res.Failed {
		reasons[f.Order.ID()] = f.Reason
	}
	var ok []ports.Delivery
	refused := map[domain.FailureReason][]ports.Delivery{}
	for _, d := range ds {
		if r, failed := reasons[d.Order.ID()]; failed {
			refused[r] = append(refused[r], d)
		} else {
			ok = append(ok, d)
		}
	}
	for r, group := range refused {
		if err := w.queue.DeadLetter(ctx, group, r); err != nil {
			return err
		}
	}
	if len(ok) == 0 {
		return nil
	}
	return w.queue.Ack(ctx, ok)
}

// settle retries write-then-confirm until both succeed or ctx ends. Both are
// idempotent, so repeating a write whose confirm failed is safe.
func (w *Worker) settle(ctx context.Context, ds []ports.Delivery,
	write func(context.Context, []domain.VoucherOrder) (application.BatchResult, error),
) (application.BatchResult, error) {
	orders := make([]domain.VoucherOrder, len(ds))
	for i, d := range ds {
		orders[i] = d.Order
	}
	backoff := w.opts.MinBackoff
	for attempt := 1; ; attempt++ {
		start := time.Now()
		res, err := write(ctx, orders)
		if err == nil {
			err = w.confirm(ctx, ds, res)
			if err == nil {
				w.logBatch(res, len(orders), attempt, time.Since(start))
				return res, nil
			}
			err = errors.Join(errors.New("confirm to the queue after commit"), err)
		}
		if ctx.Err() == nil {
			w.log.Error().Err(err).Int("orders", len(orders)).Int("attempt", attempt).
				Dur("retry_in", backoff).Msg("fulfil batch failed; retrying")
			if w.backOff(ctx, "fulfil", &backoff) {
				continue
			}
		}
		ids := make([]int64, len(orders))
		for i, o := range orders {
			ids[i] = int64(o.ID())
		}
		w.log.Error().Err(ctx.Err()).Ints64("orders", ids).
			Msg("stopped before this batch committed; a channel queue loses these orders (run seckill reconcile), a stream keeps them pending")
		return application.BatchResult{}, ctx.Err()
	}
}

// logSpent says what really happened to each order past the delivery limit.
func (w *Worker) logSpent(spent []ports.Delivery, res application.BatchResult) {
	failed := make(map[domain.OrderID]ports.Outcome, len(res.Failed))
	for _, f := range res.Failed {
		failed[f.Order.ID()] = f
	}
	for _, d := range spent {
		f, isFailed := failed[d.Order.ID()]
		level := zerolog.WarnLevel
		if isFailed && f.New {
			level = zerolog.ErrorLevel
		}
		ev := orderFields(w.log.WithLevel(level), d.Order).Int("deliveries", d.Attempts).Str("ref", d.Ref)
		if !isFailed {
			ev.Str("outcome", string(domain.OrderCreated)).
				Msg("order delivered too often, but the database had already created it: acknowledged, not dead-lettered")
			continue
		}
		ev.Str("outcome", string(domain.OrderFailed)).Str("reason", string(f.Reason)).Bool("recorded_now", f.New).
			Msg("order delivered too often: recorded as failed with this reason and moved to the dead letter; check why its consumers died")
	}
}

// logBatch logs a routine batch at debug (a metric counts it), one with retries or failures at info.
func (w *Worker) logBatch(res application.BatchResult, n, attempt int, took time.Duration) {
	base := w.log.Debug()
	if attempt > 1 || len(res.Failed) > 0 {
		base = w.log.Info()
	}
	ev := base.Int("orders", n).Int("created", res.Created).Int("replayed", res.Replayed).
		Int("failed", len(res.Failed)).Dur("took", took)
	if attempt > 1 {
		ev = ev.Int("attempts", attempt)
	}
	ev.Msg("batch fulfilled")
	for _, f := range res.Failed {
		ev := orderFields(w.log.Warn(), f.Order).Str("reason", string(f.Reason))
		if f.Cause != nil {
			ev = ev.AnErr("cause", f.Cause)
		}
		ev.Msg("order failed")
	}
}

func orderFields(ev *zerolog.Event, o domain.VoucherOrder) *zerolog.Event {
	return ev.Int64("order", int64(o.ID())).Int64("user", int64(o.UserID())).Int64("voucher", int64(o.VoucherID()))
}

// backOff tells Retried, waits out backoff and doubles it up to MaxBackoff;
// false when ctx ended first.
func (w *Worker) backOff(ctx context.Context, stage string, backoff *time.Duration) bool {
	if w.opts.Retried != nil {
		w.opts.Retried(stage, *backoff)
	}
	t := time.NewTimer(*backoff)
	defer t.Stop()
	select {
	case <-t.C:
		*backoff = min(*backoff*2, w.opts.MaxBackoff)
		return true
	case <-ctx.Done():
		return false
	}
}
