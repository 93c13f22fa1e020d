package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// ClaimSeckill is the hot path: issue an order ID, reserve stock and the user's
// one order in the gate, and hand the order to the queue. It never touches the
// database.
type ClaimSeckill struct {
	ids   ports.OrderIDs
	gate  ports.StockGate
	queue ports.OrderQueue
	// budget bounds the claim independently of the caller: once the gate may
	// have reserved, a client hanging up must not cut the claim in half.
	budget time.Duration
}

// ClaimBudget is how long a claim may take once started, whatever the caller.
// It is generous on purpose: in a stampede a claim may wait for a Redis
// connection, and waiting is better than failing a claim that would succeed.
const ClaimBudget = 10 * time.Second

// releaseBudget bounds the compensation of a claim that failed midway; it gets
// its own time because the claim's may be what ran out.
const releaseBudget = 2 * time.Second

// ErrBusy: the claim could not finish within its budget and was undone, so the
// client may try again.
var ErrBusy = errors.New("service busy")

func NewClaimSeckill(ids ports.OrderIDs, gate ports.StockGate, queue ports.OrderQueue) *ClaimSeckill {
	mustHave("ClaimSeckill", map[string]any{"ids": ids, "gate": gate, "queue": queue})
	return &ClaimSeckill{ids: ids, gate: gate, queue: queue, budget: ClaimBudget}
}

// Handle returns the new order's ID once the order is reserved and queued.
// Business refusals come back as domain errors; ports.ErrQueueFull means the
// reservation was rolled back and the client may try again.
func (h *ClaimSeckill) Handle(ctx context.Context, user domain.UserID, voucher domain.VoucherID) (domain.OrderID, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	id, err := h.ids.Next(ctx)
	if err != nil {
		return 0, fmt.Errorf("issue order id: %w", err)
	}
	order, err := domain.NewVoucherOrder(id, user, voucher)
	if err != nil {
		return 0, err
	}

	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.budget)
	defer cancel()

	res, err := h.gate.Reserve(ctx, order)
	if err != nil {
		if isRefusal(err) {
			return 0, err
		}
		if h.gate.Enqueues() {
			// The script may have reserved and enqueued in one step; releasing
			// now would orphan a message that still becomes an order. Leave it:
			// if it ran, the order is fulfilled and the user's retry answers
			// duplicate; if it did not, nothing changed.
			return 0, fmt.Errorf("reserve %s: outcome unknown: %w", order, err)
		}
		// The script may or may not have run. Release is keyed by this order's
		// ID, so it undoes exactly our reservation if there is one, and nothing
		// otherwise.
		if rerr := h.release(ctx, order); rerr != nil {
			return 0, fmt.Errorf("reserve %s: %w (release after ambiguous reserve also failed, reconcile needed: %v)", order, err, rerr)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("reserve %s: %w: %w", order, ErrBusy, err)
		}
		return 0, fmt.Errorf("reserve %s: %w", order, err)
	}
	if res.Enqueued {
		return id, nil
	}
	if err := h.queue.Publish(ctx, order); err != nil {
		if rerr := h.release(ctx, order); rerr != nil {
			return 0, fmt.Errorf("publish %s: %w (rollback failed, reconcile needed: %v)", order, err, rerr)
		}
		return 0, fmt.Errorf("publish %s: %w", order, err)
	}
	return id, nil
}

func (h *ClaimSeckill) release(ctx context.Context, o domain.VoucherOrder) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseBudget)
	defer cancel()
	return h.gate.Release(ctx, o, true)
}

func isRefusal(err error) bool {
	return errors.Is(err, domain.ErrSoldOut) || errors.Is(err, domain.ErrAlreadyClaimed) ||
		errors.Is(err, domain.ErrNotStarted) || errors.Is(err, domain.ErrEnded) ||
		errors.Is(err, domain.ErrVoucherNotFound)
}
