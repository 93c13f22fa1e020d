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

// PayOrder records a payment: an unpaid order becomes paid; a cancelled one
// refunding (the money is recorded and owed back; the unit it gave back stays
// on sale); the same notification again changes nothing.
type PayOrder struct {
	orders   ports.OrderRepository
	vouchers ports.VoucherRepository
	life     ports.OrderLifecycle
	clock    ports.Clock
	horizon  time.Duration
}

// NewPayOrder: window is the pay window (0 = never expires). An order the
// database does not have yet that was claimed less than that long ago (15
// minutes when 0) may still be queued, and answers ErrBusy so the provider
// retries; an older one is unknown.
func NewPayOrder(orders ports.OrderRepository, vouchers ports.VoucherRepository, life ports.OrderLifecycle, clock ports.Clock, window time.Duration) *PayOrder {
	mustHave("PayOrder", map[string]any{"orders": orders, "vouchers": vouchers, "life": life, "clock": clock})
	if window <= 0 {
		window = 15 * time.Minute
	}
	return &PayOrder{orders: orders, vouchers: vouchers, life: life, clock: clock, horizon: window}
}

// Handle returns the order's status after the payment and whether it changed.
// Errors: domain.ErrOrderNotFound; a *domain.ValidationError (wrong amount or
// transaction id: nothing recorded); domain.ErrNotPayable (the order failed:
// never sold); ErrBusy (may still be queued, or the database failed).
func (h *PayOrder) Handle(ctx context.Context, n PaymentNotice) (domain.OrderStatus, bool, error) {
	st, err := h.orders.Find(ctx, n.Order)
	switch {
	case errors.Is(err, domain.ErrOrderNotFound):
		now, claimed := h.clock.Now(), n.Order.Time()
		if n.Order > 0 && !claimed.After(now.Add(time.Minute)) && now.Sub(claimed) < h.horizon {
			return domain.OrderStatus{}, false, fmt.Errorf("order %d may still be queued: %w", n.Order, ErrBusy)
		}
		return domain.OrderStatus{}, false, domain.ErrOrderNotFound
	case err != nil:
		return domain.OrderStatus{}, false, fmt.Errorf("find order %d: %w: %w", n.Order, ErrBusy, err)
	case st.State == domain.OrderFailed:
		return st, false, domain.ErrNotPayable
	}
	v, err := h.vouchers.Get(ctx, st.Order.VoucherID())
	if err != nil {
		return domain.OrderStatus{}, false, fmt.Errorf("voucher of order %d: %w: %w", n.Order, ErrBusy, err)
	}
	if err := domain.CheckPayment(v.PayValue(), n.Amount, n.TransactionID); err != nil {
		return domain.OrderStatus{}, false, err
	}
	st, changed, err := h.life.Pay(ctx, n.Order, n.TransactionID, h.clock.Now())
	switch {
	case errors.Is(err, domain.ErrNotPayable):
		return st, false, err
	case err != nil:
		return domain.OrderStatus{}, false, fmt.Errorf("pay order %d: %w: %w", n.Order, ErrBusy, err)
	}
	return st, changed, nil
}
