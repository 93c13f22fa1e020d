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
	budget time.Duration
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
// closing, or the claim ran out of time and was undone), so the client may
// try again. It wraps the cause.
var ErrBusy = errors.New("service busy")

func NewClaimSeckill(ids ports.OrderIDs, admission ports.Admission) *ClaimSeckill {
	mustHave("ClaimSeckill", map[string]any{"ids": ids, "admission": admission})
	return &ClaimSeckill{ids: ids, admission: admission, budget: ClaimBudget}
}

// Handle returns the new order's ID once the order is admitted. Business
// refusals come back as *domain.Refusal errors, and a claim not taken as
// ErrBusy; either way nothing changed, and the order ID was handed back.
func (h *ClaimSeckill) Handle(ctx context.Context, user domain.UserID, voucher domain.VoucherID) (domain.OrderID, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// One budget from the start, detached from the caller: once the
	// admission may have reserved, a client hanging up must not cut the
	// claim in half, and before that finishing costs at most the budget.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.budget)
	defer cancel()

	id, err := h.ids.Next(ctx)
	if err != nil {
		if ctx.Err() != nil {
			// Out of time before anything was reserved: nothing changed.
			return 0, fmt.Errorf("issue order id: %w: %w", ErrBusy, err)
		}
		return 0, fmt.Errorf("issue order id: %w", err)
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
	return 0, fmt.Errorf("admit %s: %w", order, err)
}
