package application

import (
	"context"
	"errors"
	"fmt"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// GetOrder answers where a user's order stands: created or failed once the
// database has it, queued while only the gate does.
type GetOrder struct {
	orders ports.OrderRepository
	gate   ports.StockGate
}

func NewGetOrder(orders ports.OrderRepository, gate ports.StockGate) *GetOrder {
	mustHave("GetOrder", map[string]any{"orders": orders, "gate": gate})
	return &GetOrder{orders: orders, gate: gate}
}

// Handle returns domain.ErrOrderNotFound for unknown orders and for other
// users' orders alike, so IDs cannot be probed: both take the same path (the
// database, then the gate), so not even the answer's timing tells them apart.
func (h *GetOrder) Handle(ctx context.Context, user domain.UserID, id domain.OrderID) (domain.OrderStatus, error) {
	st, err := h.orders.Find(ctx, id)
	switch {
	case err == nil && st.Order.UserID() == user:
		return st, nil
	case err != nil && !errors.Is(err, domain.ErrOrderNotFound):
		return domain.OrderStatus{}, fmt.Errorf("find order %d: %w: %w", id, ErrBusy, err)
	}
	o, ok, err := h.gate.Queued(ctx, user, id)
	if err != nil {
		// Redis down or failing over: ask again shortly (an outcome-unknown
		// claim's status is read here).
		return domain.OrderStatus{}, fmt.Errorf("look up queued order %d: %w: %w", id, ErrBusy, err)
	}
	if !ok {
		return domain.OrderStatus{}, domain.ErrOrderNotFound
	}
	return domain.OrderStatus{Order: o, State: domain.OrderQueued}, nil
}

// CancelOrder is a buyer cancelling an unpaid order: the order is cancelled
// (reason cancelled) and its unit goes back to the sale at once, by the same
// steps as an expiry (ExpireOrders), whose later passes finish the gate's
// side if this one fails it.
type CancelOrder struct {
	find GetOrder
	life ports.OrderLifecycle
	gate ports.StockGate
}

func NewCancelOrder(orders ports.OrderRepository, life ports.OrderLifecycle, gate ports.StockGate) *CancelOrder {
	mustHave("CancelOrder", map[string]any{"orders": orders, "life": life, "gate": gate})
	return &CancelOrder{find: GetOrder{orders: orders, gate: gate}, life: life, gate: gate}
}

// Handle answers the order's status after the cancellation; another user's
// order and an unknown one are domain.ErrOrderNotFound alike; a paid one is
// domain.ErrAlreadyPaid; an order still queued (claimed, not yet in the
// database) is ErrBusy: the client retries, and the cancellation applies once
// the row exists. Cancelling a cancelled order changes nothing.
func (h *CancelOrder) Handle(ctx context.Context, user domain.UserID, id domain.OrderID) (domain.OrderStatus, error) {
	// Unknown, or another user's: the same path (the gate) either way, as
	// GetOrder, so neither the answer nor its timing tells them apart.
	st, err := h.find.Handle(ctx, user, id)
	switch {
	case err != nil:
		return domain.OrderStatus{}, err
	case st.State == domain.OrderQueued:
		return domain.OrderStatus{}, fmt.Errorf("order %d is not in the database yet: %w", id, ErrBusy)
	}
	st, changed, err := h.life.Cancel(ctx, id)
	switch {
	case errors.Is(err, domain.ErrAlreadyPaid):
		return st, err
	case err != nil:
		return domain.OrderStatus{}, fmt.Errorf("cancel order %d: %w: %w", id, ErrBusy, err)
	}
	if changed {
		// The database has the unit back and the order cancelled; a failed
		// release is finished by the expiry loop's next pass, so the buyer's
		// answer does not depend on it.
		_, _ = releaseAndRecord(ctx, h.life, h.gate, []domain.VoucherOrder{st.Order})
	}
	return st, nil
}
