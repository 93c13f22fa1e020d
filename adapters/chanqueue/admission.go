package chanqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Admission is the channel driver's ports.Admission: the gate reserves, then
// the order goes on this process's channel. The two are separate steps, so
// the Admission owns the rollback between them: whenever the order is not on
// the channel at the end, the reservation made under its ID is released, and
// the claim changes nothing.
type Admission struct {
	gate  ports.StockGate
	queue *Queue
}

var _ ports.Admission = (*Admission)(nil)

// releaseBudget bounds a rollback; it gets its own time because the claim's
// may be what ran out.
const releaseBudget = 2 * time.Second

// NewAdmission takes the channel queue itself, not any OrderQueue: only the
// queue the worker drains may carry what this gate reserved, so wiring it to
// another queue does not compile.
func NewAdmission(gate ports.StockGate, queue *Queue) *Admission {
	if gate == nil || queue == nil {
		panic("chanqueue: NewAdmission needs a gate and a queue")
	}
	return &Admission{gate: gate, queue: queue}
}

// Admit reserves, then publishes. Its rule for an ambiguous answer (the gate
// failed without saying whether it reserved): release by order ID, which
// undoes exactly this claim's reservation if the script ran, and nothing
// otherwise; only then is the claim "not admitted".
//
// When the claim's own time ran out the release runs in the background and
// the claim is answered not admitted at once: the caller's budget is the
// bound of every wait, and a Redis that stalled the reserve would stall the
// release too. The gate sends the release after the reserve on the same
// ordered stream, so it undoes a reserve that runs late. Should the release
// fail as well, the unit stays reserved without an order (never an order
// without a unit) until reconcile.
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
		// The order never reaches the channel, so no order will exist: the
		// claim is not admitted, whether or not the release got through.
		// A failed release leaves the unit reserved without an order (the
		// user's retry answers duplicate) until reconcile repairs Redis.
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
