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

// ExpireOrders cancels the unpaid orders whose pay window has passed and
// gives their units back to the sale: first in the database (one transaction
// per pass: status, reason and stock), then in the gate, then it records
// that the gate has them. Each step is safe to repeat, so a crash between
// any two is finished by a later pass, on this instance or another:
//   - the status transition is the guard: an order is cancelled once, and
//     only a cancellation adds its unit to the database's stock;
//   - the gate's Return undoes only the mark that holds this very order id,
//     so returning twice, or after the buyer claimed again, gives nothing
//     more, and no heal puts the mark back (ports.StockGate.Return).
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

// PaymentNotice is a payment provider's notification, its signature already
// checked by the driving adapter.
type PaymentNotice struct {
	Order         domain.OrderID
	Amount        int64 // fen
	TransactionID string
}

// PayOrder records a payment, once per transaction id, and never loses
// money: an unpaid order becomes paid; a cancelled one refunding (the money
// is owed back; the unit it gave back stays on sale); a second transaction
// for a paid (or refunding) order is a double charge, and one for an order
// that failed was never for a sale: both are recorded, owed back and leave
// the order as it is; the same notification again changes nothing.
type PayOrder struct {
	orders   ports.OrderRepository
	vouchers ports.VoucherRepository
	life     ports.OrderLifecycle
	index    ports.OrderIndex
	clock    ports.Clock
	horizon  time.Duration
}

// NewPayOrder: window is the pay window (0 = never expires). An order the
// database does not have yet may still be queued, and answers ErrBusy so the
// provider retries: one claimed less than the window ago (15 minutes when
// 0), without asking; an older one only while the gate still holds it
// (index), since a queue can be slower than the window (the database down
// for longer): refused as unknown, the provider would stop retrying and the
// money would never be recorded.
func NewPayOrder(orders ports.OrderRepository, vouchers ports.VoucherRepository, life ports.OrderLifecycle, index ports.OrderIndex, clock ports.Clock, window time.Duration) *PayOrder {
	mustHave("PayOrder", map[string]any{"orders": orders, "vouchers": vouchers, "life": life, "index": index, "clock": clock})
	if window <= 0 {
		window = 15 * time.Minute
	}
	return &PayOrder{orders: orders, vouchers: vouchers, life: life, index: index, clock: clock, horizon: window}
}

// Handle returns what the payment did. Errors: domain.ErrOrderNotFound; a
// *domain.ValidationError (wrong amount, a bad transaction id, or one
// already recorded for another order: nothing recorded); ErrBusy (may still
// be queued, or the database failed).
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
