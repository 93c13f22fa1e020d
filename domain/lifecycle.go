package domain

import (
	"strings"
	"time"
)

// A created order is paid, or cancelled (by its owner or the pay window) giving
// its unit back; money after a cancellation makes it refunding, never resurrecting the unit.
const (
	OrderPaid      OrderState = "paid"
	OrderCancelled OrderState = "cancelled" // with a CancelReason
	OrderRefunding OrderState = "refunding" // paid after it was cancelled
)

type CancelReason string

const (
	CancelExpired CancelReason = "expired"   // not paid within the pay window
	CancelByBuyer CancelReason = "cancelled" // its owner cancelled it
)

func ParseCancelReason(s string) (CancelReason, error) {
	return parseEnum(s, "reason", "cancel reason", CancelExpired, CancelByBuyer)
}

var ErrAlreadyPaid = &Refusal{"already_paid", "order is already paid"}

func (s OrderState) HoldsUnit() bool { return s == OrderQueued || s == OrderCreated || s == OrderPaid }

// Place is the order as one of its buyer's places: Forfeited once its state holds no unit.
func (st OrderStatus) Place() VoucherOrder {
	if st.State.HoldsUnit() {
		return st.Order
	}
	return st.Order.Forfeited()
}

// AfterCancel is where a cancellation takes an order in state s, and whether that is a change.
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

// PayDeadline is when an order claimed under id must be paid by; zero for no window.
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

// PayBy is st's PayDeadline while it is created (unpaid); zero otherwise.
func (st OrderStatus) PayBy() time.Time {
	if st.State != OrderCreated {
		return time.Time{}
	}
	return st.PayDeadline
}

const MaxTransactionID = 64 // the column's width

// CheckPayment refuses an amount (fen) other than payValue, or a transaction id not 1..64 Printable.
func CheckPayment(payValue, amount int64, transactionID string) error {
	switch {
	case amount != payValue:
		return invalid("amount", "must be the voucher's payValue")
	case transactionID == "" || len(transactionID) > MaxTransactionID:
		return invalid("transactionId", "must be 1 to %d characters", MaxTransactionID)
	case !Printable(transactionID):
		return invalid("transactionId", "must be printable ASCII")
	}
	return nil
}

// Printable tells whether s is printable ASCII without spaces: the rule for outside identifiers.
func Printable(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e })
}

// PaymentKind is what one provider transaction did, recorded once per transaction id.
type PaymentKind string

const (
	PaymentSettled PaymentKind = "settled" // paid an unpaid order
	PaymentLate    PaymentKind = "late"    // after a cancellation: the order turns refunding
	PaymentDouble  PaymentKind = "double"  // a second transaction for a paid or refunding order
	PaymentUnsold  PaymentKind = "unsold"  // for an order that failed
)

func ParsePaymentKind(s string) (PaymentKind, error) {
	return parseEnum(s, "kind", "payment kind", PaymentSettled, PaymentLate, PaymentDouble, PaymentUnsold)
}

// Owed tells whether the money must go back to the payer.
func (k PaymentKind) Owed() bool { return k != PaymentSettled }

// Pay is what a new transaction does to an order in state s: its kind and the state after.
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

var ErrTransactionReused = invalid("transactionId", "was already recorded for another order")

type Payment struct {
	TransactionID string
	Order         VoucherOrder
	Amount        int64 // fen
	At            time.Time
}

// OrderFilter selects a sale's orders (never failed ones) for its operator: "unpaid" is created.
type OrderFilter string

const (
	AllOrders       OrderFilter = ""
	UnpaidOrders    OrderFilter = "unpaid"
	PaidOrders      OrderFilter = "paid"
	CancelledOrders OrderFilter = "cancelled"
	ExpiredOrders   OrderFilter = "expired"
	RefundingOrders OrderFilter = "refunding"
)

var orderFilters = map[OrderFilter]func(OrderStatus) bool{
	AllOrders:       func(st OrderStatus) bool { return st.State != OrderFailed && st.State != OrderQueued },
	UnpaidOrders:    func(st OrderStatus) bool { return st.State == OrderCreated },
	PaidOrders:      func(st OrderStatus) bool { return st.State == OrderPaid },
	CancelledOrders: func(st OrderStatus) bool { return st.State == OrderCancelled },
	ExpiredOrders:   func(st OrderStatus) bool { return st.State == OrderCancelled && st.CancelReason == CancelExpired },
	RefundingOrders: func(st OrderStatus) bool { return st.State == OrderRefunding },
}

// ParseOrderFilter accepts "" (every order) and the names above.
func ParseOrderFilter(s string) (OrderFilter, error) {
	if _, ok := orderFilters[OrderFilter(s)]; !ok {
		return "", invalid("state", "must be one of unpaid, paid, cancelled, expired, refunding (or omitted for all)")
	}
	return OrderFilter(s), nil
}

func (f OrderFilter) Matches(st OrderStatus) bool {
	match, ok := orderFilters[f]
	return ok && match(st)
}
