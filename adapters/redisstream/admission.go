package redisstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Admission is the Stream driver's ports.Admission: one claim script decides
// window, stock and one-per-user, reserves, and appends the order to the
// voucher's stream, atomically. There is no second step to roll back.
//
// Its rule for an ambiguous answer (Redis failed without saying whether the
// script ran): leave it. Releasing could orphan a message that still becomes
// an order; if the script ran, the order is fulfilled and the user's retry
// answers duplicate; if it did not, nothing changed.
type Admission struct {
	gate *redisgate.Gate
}

var _ ports.Admission = (*Admission)(nil)

// NewAdmission takes the stream queue itself: the gate appends to the streams
// that this queue's consumer group reads, so wiring the stream admission
// without the stream queue does not compile, and a prefix mismatch (the gate
// writing streams the queue never reads) stops the process at start.
func NewAdmission(gate *redisgate.Gate, queue *Queue) *Admission {
	if gate == nil || queue == nil {
		panic("redisstream: NewAdmission needs a gate and a queue")
	}
	if gate.Prefix() != queue.opts.Prefix {
		panic(fmt.Sprintf("redisstream: the gate writes under %q but the queue reads %q", gate.Prefix(), queue.opts.Prefix))
	}
	return &Admission{gate: gate}
}

func (a *Admission) Admit(ctx context.Context, o domain.VoucherOrder) error {
	if err := a.gate.ReserveAndAppend(ctx, o); err != nil {
		if domain.IsRefusal(err) || errors.Is(err, ports.ErrNotAdmitted) {
			return err
		}
		return fmt.Errorf("%w (outcome unknown: if the script ran, the order is fulfilled)", err)
	}
	return nil
}
