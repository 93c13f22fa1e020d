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
	return findOrder(ctx, h.orders, h.gate, user, id)
}

// findOrder is GetOrder.Handle, which CancelOrder shares.
func findOrder(ctx context.Context, orders ports.OrderRepository, gate ports.StockGate, user domain.UserID, id domain.OrderID) (domain.OrderStatus, error) {
	st, err := orders.Find(ctx, id)
	switch {
	case err == nil && st.Order.UserID() == user:
		return st, nil
	case err != nil && !errors.Is(err, domain.ErrOrderNotFound):
		return domain.OrderStatus{}, fmt.Errorf("find order %d: %w: %w", id, ErrBusy, err)
	}
	o, ok, err := gate.Queued(ctx, user, id)
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
