package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

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
