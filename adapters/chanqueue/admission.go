package chanqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Admission is the channel driver's ports.Admission: the gate reserves, then
// the order goes on this process's channel. Whenever the order is not on the
// channel at the end, the reservation made under its ID is released.
type Admission struct {
	gate  ports.StockGate
	queue *Queue
}

var _ ports.Admission = (*Admission)(nil)

// releaseBudget bounds a rollback; its own, because the claim's may be what ran out.
const releaseBudget = 2 * time.Second

// NewAdmission takes the channel queue itself: only the queue the worker
// drains may carry what this gate reserved.
func NewAdmission(gate ports.StockGate, queue *Queue) *Admission {
	if gate == nil || queue == nil {
		panic("chanqueue: NewAdmission needs a gate and a queue")
	}
	return &Admission{gate: gate, queue: queue}
}

// Admit reserves, then publishes. On an ambiguous reserve it releases by order
// ID (undoing exactly this claim's reservation, if any), and the claim is "not
// admitted". When the claim's own time ran out the release runs in the
// background: a Redis that stalled the reserve would stall it too, and the
// gate sends it after the reserve on the same ordered stream, so it undoes a
// late reserve. A failed release leaves a unit reserved without an order
// (never an order without a unit) until reconcile.
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
