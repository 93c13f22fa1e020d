package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// ClaimSeckill is the hot path: issue an order ID and have the admission
// reserve the stock and the user's one order and hand the order to
// fulfilment. It never touches the database.
type ClaimSeckill struct {
	ids       ports.OrderIDs
	admission ports.Admission
	// budget bounds the claim independently of the caller: once the admission
	// may have reserved, a client hanging up must not cut the claim in half.
	budget   time.Duration
	deadline SharedDeadlines
}

// ClaimBudget is how long a claim may take once started, whatever the caller:
// every wait of the claim (the order id lease, the sold-out probe, a Redis
// connection, Redis's answer) ends with it. A healthy claim takes about a
// millisecond; two seconds rides out a hiccup (a failover's first retry)
// and still answers a stalled backend before a user retrying by hand
// would. A claim that runs out of it before anything was reserved is
// answered busy; once the admission may have reserved, the driver undoes it
// (channel: busy) or cannot tell (stream: an error stating the outcome is
// unknown, the order fulfilled if the script ran).
const ClaimBudget = 2 * time.Second

// ErrBusy: the claim was not taken and nothing changed (the queue was full or
// closing, Redis could not be reached before anything was reserved, or the
// claim ran out of time and was undone), so the client may try again. It
// wraps the cause.
var ErrBusy = errors.New("service busy")

// ErrOutcomeUnknown: the claim may have been taken. Redis failed (or the
// claim ran out of its budget) after the admission was sent, and the driver
// cannot undo it (stream mode: the script may have reserved and enqueued the
// order, which is then fulfilled). The error is an *OutcomeUnknownError
// carrying the order's ID, which the order status then resolves: queued or
// created if the script ran, not found if it did not.
var ErrOutcomeUnknown = errors.New("claim outcome unknown")

// OutcomeUnknownError is ErrOutcomeUnknown with the order's ID.
type OutcomeUnknownError struct {
	Order domain.OrderID
	Err   error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("admit order %d: %v: %v", e.Order, ErrOutcomeUnknown, e.Err)
}

func (e *OutcomeUnknownError) Unwrap() []error { return []error{ErrOutcomeUnknown, e.Err} }

func NewClaimSeckill(ids ports.OrderIDs, admission ports.Admission) *ClaimSeckill {
	mustHave("ClaimSeckill", map[string]any{"ids": ids, "admission": admission})
	return &ClaimSeckill{ids: ids, admission: admission, budget: ClaimBudget}
}

// Handle returns the new order's ID once the order is admitted. Business
// refusals come back as *domain.Refusal errors, and a claim not taken as
// ErrBusy; either way nothing changed, and the order ID was handed back. A
// claim that may have been taken (Redis failed after the admission was sent)
// comes back as an *OutcomeUnknownError carrying its order ID.
func (h *ClaimSeckill) Handle(ctx context.Context, user domain.UserID, voucher domain.VoucherID) (domain.OrderID, error) {
	return h.HandleSince(ctx, time.Now(), user, voucher)
}

// HandleSince is Handle with the budget counted from started, when the
// request arrived: what the caller already waited (a session lookup on Redis)
// comes off the claim's budget, so the whole request answers within one.
func (h *ClaimSeckill) HandleSince(ctx context.Context, started time.Time, user domain.UserID, voucher domain.VoucherID) (domain.OrderID, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// One budget from the start, detached from the caller: once the
	// admission may have reserved, a client hanging up must not cut the
	// claim in half, and before that finishing costs at most the budget.
	ctx = h.deadline.Context(ctx, started.Add(h.budget))

	id, err := h.ids.Next(ctx)
	if err != nil {
		// Nothing was reserved yet, whatever went wrong (out of time, Redis
		// unreachable, the day's sequence exhausted): nothing changed, and
		// the client may try again.
		return 0, fmt.Errorf("issue order id: %w: %w", ErrBusy, err)
	}
	order, err := domain.NewVoucherOrder(id, user, voucher)
	if err != nil {
		return 0, err
	}

	err = h.admission.Admit(ctx, order)
	switch {
	case err == nil:
		return id, nil
	case domain.IsRefusal(err):
		// Nothing was written under this ID: the next claim may use it, so
		// refusals (most answers of a stampede) do not exhaust the day's IDs.
		h.ids.Unused(id)
		return 0, err
	case errors.Is(err, ports.ErrNotAdmitted):
		// Undone, but the ID was written to the gate before the undo: do not
		// hand it back, so no later order ever shares it with a stale mark.
		return 0, fmt.Errorf("admit %s: %w: %w", order, ErrBusy, err)
	}
	// The admission may have taken the order and cannot tell: the ID stays
	// spent, and the client gets it to ask the order's status.
	return 0, &OutcomeUnknownError{Order: id, Err: err}
}
