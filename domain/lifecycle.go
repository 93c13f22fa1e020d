package domain

import (
	"time"
)

// The order lifecycle after the database has an order (issue 25): created
// (unpaid) until paid within the pay window, or cancelled, by its owner or
// by the window's expiry, which gives its unit back to the sale. Money that
// arrives after a cancellation turns the order refunding: it is recorded and
// owed back, and never resurrects a unit already sold again.
const (
	OrderPaid      OrderState = "paid"
	OrderCancelled OrderState = "cancelled" // with a CancelReason
	OrderRefunding OrderState = "refunding" // paid after it was cancelled
)

// CancelReason says why an order was cancelled.
type CancelReason string

const (
	CancelExpired CancelReason = "expired"   // not paid within the pay window
	CancelByBuyer CancelReason = "cancelled" // its owner cancelled it
)

// ParseCancelReason accepts only the reasons above.
func ParseCancelReason(s string) (CancelReason, error) {
	return parseEnum(s, "reason", "cancel reason", CancelExpired, CancelByBuyer)
}

// ErrAlreadyPaid refuses to cancel a paid order: 200 success=false.
var ErrAlreadyPaid = &Refusal{"already_paid", "order is already paid"}

// HoldsUnit tells whether an order in this state keeps its unit of stock
// and its buyer's one-per-voucher mark: a cancelled (or refunding) order
// gave both back.
func (s OrderState) HoldsUnit() bool {
	return s == OrderQueued || s == OrderCreated || s == OrderPaid
}

// Place is the order as a place among its buyer's in the sale: Forfeited
// once its state holds no unit (the place keeps counting toward the limit).
func (st OrderStatus) Place() VoucherOrder {
	if st.State.HoldsUnit() {
		return st.Order
	}
	return st.Order.Forfeited()
}

// AfterCancel is where a cancellation takes an order in state s, and whether
// that is a change: a created order is cancelled; a cancelled or refunding
// one stays as it is (cancelling is idempotent), and so does a failed one,
// which holds nothing; a paid one refuses with ErrAlreadyPaid.
func (s OrderState) AfterCancel() (OrderState, bool, error) {
	switch s {
	case OrderCreated:
		return OrderCancelled, true, nil
	case OrderCancelled, OrderRefunding, OrderFailed:
		return s, false, nil
	case OrderPaid:
		return s, false, ErrAlreadyPaid
	}
	return s, false, invalid("state", "an order %s cannot be cancelled yet", s)
}

// PayDeadline is when an order claimed under id must be paid by, counted
// from the claim (the id's timestamp); zero when window is 0 (never expires).
func PayDeadline(id OrderID, window time.Duration) time.Time {
	if window <= 0 {
		return time.Time{}
	}
	return id.Time().Add(window)
}

// Lifecycle is what the database records of an order beyond its state.
type Lifecycle struct {
	PayDeadline  time.Time    // zero: never expires
	CancelReason CancelReason // set when cancelled or refunding
	PaidAt       time.Time    // set when paid or refunding
}

// PayBy is when st must still be paid by: its PayDeadline while it is
// created (unpaid); zero once paid, cancelled or failed, or with no window.
func (st OrderStatus) PayBy() time.Time {
	if st.State != OrderCreated {
		return time.Time{}
	}
	return st.PayDeadline
}

// MaxTransactionID bounds a payment provider's transaction id (the column's
// width).
const MaxTransactionID = 64

// CheckPayment refuses a notification whose amount (in fen) is not the
// voucher's payValue, or whose transaction id is empty, too long or not
// printable ASCII: nothing is recorded from it.
func CheckPayment(payValue, amount int64, transactionID string) error {
	if amount != payValue {
		return invalid("amount", "must be the voucher's payValue")
	}
	if transactionID == "" || len(transactionID) > MaxTransactionID {
		return invalid("transactionId", "must be 1 to %d characters", MaxTransactionID)
	}
	if !Printable(transactionID) {
		return invalid("transactionId", "must be printable ASCII")
	}
	return nil
}

// Printable tells whether s is printable ASCII without spaces (0x21 to 0x7e):
// the one rule for an identifier chosen outside (a key, a transaction id).
func Printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}
