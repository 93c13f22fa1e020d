package domain

import "time"

// PaymentKind is what one received payment (one provider transaction) did.
// Money is never lost: every signed notification of the right amount is
// recorded once per transaction id with its kind, and every kind but
// settled is money the shop must give back.
type PaymentKind string

const (
	// PaymentSettled paid an unpaid order.
	PaymentSettled PaymentKind = "settled"
	// PaymentLate arrived after the order was cancelled (expired or by its
	// buyer): the order turns refunding; its unit stays on sale.
	PaymentLate PaymentKind = "late"
	// PaymentDouble is a second transaction for an order already paid (or
	// already refunding): a double charge; the order is left as it is.
	PaymentDouble PaymentKind = "double"
	// PaymentUnsold is for an order that failed: it was never sold.
	PaymentUnsold PaymentKind = "unsold"
)

// ParsePaymentKind accepts only the kinds above.
func ParsePaymentKind(s string) (PaymentKind, error) {
	return parseEnum(s, "kind", "payment kind", PaymentSettled, PaymentLate, PaymentDouble, PaymentUnsold)
}

// Owed tells whether the payment's money must go back to the payer.
func (k PaymentKind) Owed() bool { return k != PaymentSettled }

// Pay is what a new transaction does to an order in state s: the kind it
// is recorded as, and the state the order takes (s itself when it stays).
// A created order becomes paid (settled); a cancelled one refunding (late:
// the money is owed back, its unit stays returned); a paid or refunding one
// stays as it is (double), and so does a failed one, never sold (unsold). A
// queued order has no row to pay yet.
func (s OrderState) Pay() (PaymentKind, OrderState, error) {
	switch s {
	case OrderCreated:
		return PaymentSettled, OrderPaid, nil
	case OrderCancelled:
		return PaymentLate, OrderRefunding, nil
	case OrderPaid, OrderRefunding:
		return PaymentDouble, s, nil
	case OrderFailed:
		return PaymentUnsold, s, nil
	}
	return "", s, invalid("state", "an order %s cannot be paid yet", s)
}

// ErrTransactionReused refuses a notification whose transaction id was
// already recorded for another order: a provider's transaction pays one
// order, so nothing is recorded from it.
var ErrTransactionReused = invalid("transactionId", "was already recorded for another order")

// Payment is one provider transaction the shop received for an order.
type Payment struct {
	TransactionID string
	Order         VoucherOrder
	Amount        int64 // fen
	At            time.Time
}
