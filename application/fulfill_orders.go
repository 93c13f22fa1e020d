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

// Handle commits the batch, then releases the gate's hold for every failed
// order whose user ends up with no order (so the user is not told "duplicate"
// for an order that does not exist). The unit goes back to the gate's stock
// only when the database still has it (domain.FailureReason.ReturnsStock):
// out_of_stock means the database, the source of truth, had none to give. A
// duplicate keeps the user's mark; the gate's stock then counts one unit too
// few until `seckill reconcile` sets it from the database.
//
// A batch the database refuses for good (ports.ErrPermanent) is split in
// halves until the order at fault is alone; that order is recorded failed
// (domain.FailRefused) and the rest of the batch lands. Retrying the whole
// batch instead would hold every good order behind the bad one forever.
//
// An error means the batch must be retried as a whole; that is safe because
// CreateBatch, MarkFailed and Release are all idempotent.
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
	// One transaction per half: about 2*log2(n) transactions find one bad
	// order among n. Halves that land stay landed if a later half fails
	// transiently; the retry replays them as no-ops.
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

// refuse records one order the database refused for good as failed, keeping
// the database's words in the outcome for the log.
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

// Reject records orders the queue gave up on (a poison message, too many
// deliveries) as failed for reason, and settles the gate like Handle. An order
// the database already has an outcome for keeps it.
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
