package application

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	mustHave("GetOrder", "orders", orders, "gate", gate)
	return &GetOrder{orders: orders, gate: gate}
}

// Handle answers domain.ErrOrderNotFound for unknown and other users' orders
// alike, by the same path.
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
		return domain.OrderStatus{}, fmt.Errorf("look up queued order %d: %w: %w", id, ErrBusy, err)
	}
	if !ok {
		return domain.OrderStatus{}, domain.ErrOrderNotFound
	}
	return domain.OrderStatus{Order: o, State: domain.OrderQueued}, nil
}

// CancelOrder is a buyer cancelling an unpaid order; its unit goes back by the
// same steps as an expiry, whose later passes finish what this one fails.
type CancelOrder struct {
	find GetOrder
	life ports.OrderLifecycle
	gate ports.StockGate
}

func NewCancelOrder(orders ports.OrderRepository, life ports.OrderLifecycle, gate ports.StockGate) *CancelOrder {
	mustHave("CancelOrder", "orders", orders, "life", life, "gate", gate)
	return &CancelOrder{find: GetOrder{orders: orders, gate: gate}, life: life, gate: gate}
}

// Handle answers the order's status after the cancellation. An order still
// queued is ErrBusy: the client retries once the row exists. Idempotent.
func (h *CancelOrder) Handle(ctx context.Context, user domain.UserID, id domain.OrderID) (domain.OrderStatus, error) {
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
		// A failed return is finished by the expiry loop's next pass.
		_, _ = releaseAndRecord(ctx, h.life, h.gate, []domain.VoucherOrder{st.Order})
	}
	return st, nil
}

// ExpireOrders cancels the unpaid orders whose pay window has passed and gives
// their units back (database, gate, then the record that the gate has them);
// each step is safe to repeat, so a later pass finishes any crash.
type ExpireOrders struct {
	life  ports.OrderLifecycle
	gate  ports.StockGate
	clock ports.Clock
	batch int
}

func NewExpireOrders(life ports.OrderLifecycle, gate ports.StockGate, clock ports.Clock, batch int) *ExpireOrders {
	mustHave("ExpireOrders", "life", life, "gate", gate, "clock", clock)
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

// Handle expires at most one batch and returns at most one batch of units.
func (h *ExpireOrders) Handle(ctx context.Context) (ExpiryResult, error) {
	var res ExpiryResult
	due, err := h.life.ExpireDue(ctx, h.clock.Now(), h.batch)
	if err != nil {
		return res, fmt.Errorf("expire unpaid orders: %w", err)
	}
	res.Expired = len(due)
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

// releaseAndRecord gives the gate back cancelled orders' units and records it;
// a failure leaves the whole batch for the next pass.
func releaseAndRecord(ctx context.Context, life ports.OrderLifecycle, gate ports.StockGate, orders []domain.VoucherOrder) (int, error) {
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

// PaymentNotice is a payment provider's notification, its signature checked.
type PaymentNotice struct {
	Order         domain.OrderID
	Amount        int64 // fen
	TransactionID string
}

// PayOrder records a payment once per transaction id and never loses money: an
// unpaid order becomes paid; any other payment is recorded and owed back.
type PayOrder struct {
	orders   ports.OrderRepository
	vouchers ports.VoucherRepository
	life     ports.OrderLifecycle
	index    ports.OrderIndex
	clock    ports.Clock
	horizon  time.Duration
}

// NewPayOrder: window is the pay window (0: none, 15 minutes here). An order not
// in the database yet answers ErrBusy if claimed within it or while queued.
func NewPayOrder(orders ports.OrderRepository, vouchers ports.VoucherRepository, life ports.OrderLifecycle, index ports.OrderIndex, clock ports.Clock, window time.Duration) *PayOrder {
	mustHave("PayOrder", "orders", orders, "vouchers", vouchers, "life", life, "index", index, "clock", clock)
	if window <= 0 {
		window = 15 * time.Minute
	}
	return &PayOrder{orders: orders, vouchers: vouchers, life: life, index: index, clock: clock, horizon: window}
}

// Handle returns what the payment did; a *domain.ValidationError records nothing.
func (h *PayOrder) Handle(ctx context.Context, n PaymentNotice) (ports.PayResult, error) {
	st, err := h.orders.Find(ctx, n.Order)
	switch {
	case errors.Is(err, domain.ErrOrderNotFound):
		now, claimed := h.clock.Now(), n.Order.Time()
		if n.Order <= 0 || claimed.After(now.Add(time.Minute)) {
			return ports.PayResult{}, domain.ErrOrderNotFound
		}
		if now.Sub(claimed) < h.horizon {
			return ports.PayResult{}, fmt.Errorf("order %d may still be queued: %w", n.Order, ErrBusy)
		}
		switch _, queued, err := h.index.QueuedByID(ctx, n.Order); {
		case err != nil:
			return ports.PayResult{}, fmt.Errorf("is order %d queued: %w: %w", n.Order, ErrBusy, err)
		case queued:
			return ports.PayResult{}, fmt.Errorf("order %d is still queued: %w", n.Order, ErrBusy)
		}
		return ports.PayResult{}, domain.ErrOrderNotFound
	case err != nil:
		return ports.PayResult{}, fmt.Errorf("find order %d: %w: %w", n.Order, ErrBusy, err)
	}
	v, err := h.vouchers.Get(ctx, st.Order.VoucherID())
	if err != nil {
		return ports.PayResult{}, fmt.Errorf("voucher of order %d: %w: %w", n.Order, ErrBusy, err)
	}
	if err := domain.CheckPayment(v.PayValue(), n.Amount, n.TransactionID); err != nil {
		return ports.PayResult{}, err
	}
	res, err := h.life.Pay(ctx, domain.Payment{TransactionID: n.TransactionID, Order: st.Order, Amount: n.Amount, At: h.clock.Now()})
	switch {
	case errors.Is(err, domain.ErrTransactionReused), errors.Is(err, domain.ErrOrderNotFound):
		return ports.PayResult{}, err
	case err != nil:
		return ports.PayResult{}, fmt.Errorf("pay order %d: %w: %w", n.Order, ErrBusy, err)
	}
	return res, nil
}

// FulfillOrders writes a batch of claimed orders to the database and settles
// the gate for the ones the database refused.
type FulfillOrders struct {
	orders ports.OrderRepository
	gate   ports.StockGate
}

func NewFulfillOrders(orders ports.OrderRepository, gate ports.StockGate) *FulfillOrders {
	mustHave("FulfillOrders", "orders", orders, "gate", gate)
	return &FulfillOrders{orders: orders, gate: gate}
}

// BatchResult counts what a batch did.
type BatchResult struct {
	Created  int // newly created orders
	Replayed int // orders already recorded by an earlier delivery
	Failed   []ports.Outcome
}

// Handle commits the batch, then releases the gate's hold of every failed order
// whose user ends up with no order. A batch refused for good (ports.ErrPermanent)
// is halved until the bad order is alone and failed (domain.FailRefused). An
// error: retry the batch (idempotent).
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
