package application

import (
	"context"
	"fmt"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// ExpireOrders cancels the unpaid orders whose pay window has passed and
// gives their units back to the sale: first in the database (one transaction
// per pass: status, reason and stock), then in the gate, then it records
// that the gate has them. Each step is safe to repeat, so a crash between
// any two is finished by a later pass, on this instance or another:
//   - the status transition is the guard: an order is cancelled once, and
//     only a cancellation adds its unit to the database's stock;
//   - the gate's Return undoes only the mark that holds this very order id,
//     so returning twice, or after the buyer claimed again, gives nothing
//     more; and it remembers the order, so the gate's heal, which may have
//     read the order as a buyer just before it was cancelled, never puts
//     its mark back.
type ExpireOrders struct {
	life  ports.OrderLifecycle
	gate  ports.StockGate
	clock ports.Clock
	batch int
}

func NewExpireOrders(life ports.OrderLifecycle, gate ports.StockGate, clock ports.Clock, batch int) *ExpireOrders {
	mustHave("ExpireOrders", map[string]any{"life": life, "gate": gate, "clock": clock})
	if batch <= 0 {
		panic("application: ExpireOrders needs a positive batch")
	}
	return &ExpireOrders{life: life, gate: gate, clock: clock, batch: batch}
}

// ExpiryResult counts what one pass did.
type ExpiryResult struct {
	Expired  int // orders cancelled for want of payment
	Returned int // units given back to the gate (this pass's and earlier ones')
}

// Handle runs one pass: it expires at most one batch and returns at most one
// batch of units. Full says whether a batch was full (call it again now).
func (h *ExpireOrders) Handle(ctx context.Context) (ExpiryResult, error) {
	var res ExpiryResult
	due, err := h.life.ExpireDue(ctx, h.clock.Now(), h.batch)
	if err != nil {
		return res, fmt.Errorf("expire unpaid orders: %w", err)
	}
	res.Expired = len(due)
	// Then the units of cancelled orders the database has not recorded as
	// returned yet; an order whose return fails stays for the next pass.
	orders, err := h.life.Unreturned(ctx, h.batch)
	if err != nil {
		return res, fmt.Errorf("list cancelled orders to return: %w", err)
	}
	if len(orders) > 0 {
		res.Returned, err = releaseAndRecord(ctx, h.life, h.gate, orders)
	}
	return res, err
}

// Full tells whether a pass took a whole batch, so more may be waiting.
func (h *ExpireOrders) Full(r ExpiryResult) bool {
	return r.Expired >= h.batch || r.Returned >= h.batch
}

// releaseAndRecord gives the gate back the units of cancelled orders and
// records those it did.
func releaseAndRecord(ctx context.Context, life ports.OrderLifecycle, gate ports.StockGate, orders []domain.VoucherOrder) (int, error) {
	// One batch: a failed return leaves every order of it unreturned for the
	// next pass, which returns nothing twice (Return is idempotent by id).
	if err := gate.Return(ctx, orders); err != nil {
		return 0, fmt.Errorf("return %d units to the gate: %w", len(orders), err)
	}
	ids := make([]domain.OrderID, len(orders))
	for i, o := range orders {
		ids[i] = o.ID()
	}
	if err := life.Returned(ctx, ids); err != nil {
		return 0, fmt.Errorf("record %d units returned: %w", len(ids), err)
	}
	return len(ids), nil
}
