package application

import (
	"context"
	"errors"
	"fmt"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// FulfillOrders writes a batch of claimed orders to the database and settles
// the gate for the ones the database refused.
type FulfillOrders struct {
	orders ports.OrderRepository
	gate   ports.StockGate
}

func NewFulfillOrders(orders ports.OrderRepository, gate ports.StockGate) *FulfillOrders {
	mustHave("FulfillOrders", map[string]any{"orders": orders, "gate": gate})
	return &FulfillOrders{orders: orders, gate: gate}
}

// BatchResult counts what a batch did.
type BatchResult struct {
	Created  int // newly created orders
	Replayed int // orders already recorded by an earlier delivery
	Failed   []ports.Outcome
}

// Handle commits the batch, then releases the gate's hold of every failed order
// whose user ends up with no order (the unit only if FailureReason.ReturnsStock).
// A batch refused for good (ports.ErrPermanent) is halved until the bad order is
// alone and failed (domain.FailRefused). An error: retry the batch (idempotent).
func (h *FulfillOrders) Handle(ctx context.Context, orders []domain.VoucherOrder) (BatchResult, error) {
	var res BatchResult
	if len(orders) == 0 {
		return res, nil
	}
	outcomes, err := h.orders.CreateBatch(ctx, orders)
	switch {
	case err == nil:
		return h.settle(ctx, outcomes)
	case !errors.Is(err, ports.ErrPermanent):
		return res, fmt.Errorf("write batch of %d orders: %w", len(orders), err)
	case len(orders) == 1:
		return h.refuse(ctx, orders[0], err)
	}
	// About 2*log2(n) transactions find one bad order among n.
	mid := len(orders) / 2
	for _, half := range [][]domain.VoucherOrder{orders[:mid], orders[mid:]} {
		r, err := h.Handle(ctx, half)
		res.Created += r.Created
		res.Replayed += r.Replayed
		res.Failed = append(res.Failed, r.Failed...)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// refuse records o failed, with the database's words for the log.
func (h *FulfillOrders) refuse(ctx context.Context, o domain.VoucherOrder, cause error) (BatchResult, error) {
	outcomes, err := h.orders.MarkFailed(ctx, []domain.VoucherOrder{o}, domain.FailRefused)
	if err != nil {
		return BatchResult{}, fmt.Errorf("mark %s refused (%v): %w", o, cause, err)
	}
	for i := range outcomes {
		if outcomes[i].State == domain.OrderFailed && outcomes[i].Reason == domain.FailRefused {
			outcomes[i].Cause = cause
		}
	}
	return h.settle(ctx, outcomes)
}

// Reject records orders the queue gave up on as failed for reason (an order
// with an outcome keeps it) and settles the gate like Handle.
func (h *FulfillOrders) Reject(ctx context.Context, orders []domain.VoucherOrder, reason domain.FailureReason) (BatchResult, error) {
	if len(orders) == 0 {
		return BatchResult{}, nil
	}
	outcomes, err := h.orders.MarkFailed(ctx, orders, reason)
	if err != nil {
		return BatchResult{}, fmt.Errorf("mark %d orders %s: %w", len(orders), reason, err)
	}
	return h.settle(ctx, outcomes)
}

func (h *FulfillOrders) settle(ctx context.Context, outcomes []ports.Outcome) (BatchResult, error) {
	var res BatchResult
	for _, o := range outcomes {
		switch {
		case o.State == domain.OrderCreated && o.New:
			res.Created++
		case o.State == domain.OrderCreated:
			res.Replayed++
		default:
			res.Failed = append(res.Failed, o)
			if o.Reason.ReleasesBuyer() {
				if err := h.gate.Release(ctx, o.Order, o.Reason.ReturnsStock()); err != nil {
					return res, fmt.Errorf("release gate for failed %s: %w", o.Order, err)
				}
			}
		}
	}
	return res, nil
}
