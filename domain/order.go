package domain

import (
	"fmt"
	"strings"
	"time"
)

// OrderID keeps the original's layout: seconds since OrderEpoch in the high 31 bits, a 32-bit
// sequence in the low bits. IDs exceed 2^53, so they travel as JSON strings.
type OrderID int64

var OrderEpoch = time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)

const seqBits = 32

func NewOrderID(at time.Time, seq uint32) (OrderID, error) {
	secs := at.Unix() - OrderEpoch.Unix()
	if secs < 0 || secs >= 1<<31 {
		return 0, invalid("orderId", "time %s is outside the ID range", at.UTC().Format(time.RFC3339))
	}
	return OrderID(secs<<seqBits | int64(seq)), nil
}

func (id OrderID) Time() time.Time {
	return OrderEpoch.Add(time.Duration(int64(id)>>seqBits) * time.Second)
}

func (id OrderID) Seq() uint32 { return uint32(id) }

// VoucherOrder is one user's claim of one seckill voucher.
type VoucherOrder struct {
	id        OrderID
	userID    UserID
	voucherID VoucherID
	forfeited bool
}

func NewVoucherOrder(id OrderID, user UserID, voucher VoucherID) (VoucherOrder, error) {
	switch {
	case id <= 0:
		return VoucherOrder{}, invalid("orderId", "must be a positive id")
	case user <= 0:
		return VoucherOrder{}, invalid("userId", "must be a positive id")
	case voucher <= 0:
		return VoucherOrder{}, invalid("voucherId", "must be a positive id")
	}
	return VoucherOrder{id: id, userID: user, voucherID: voucher}, nil
}

func (o VoucherOrder) ID() OrderID          { return o.id }
func (o VoucherOrder) UserID() UserID       { return o.userID }
func (o VoucherOrder) VoucherID() VoucherID { return o.voucherID }

// Forfeited is the order having given its unit back while its buyer keeps the place.
func (o VoucherOrder) Forfeited() VoucherOrder { o.forfeited = true; return o }

func (o VoucherOrder) HoldsUnit() bool { return !o.forfeited }

func (o VoucherOrder) String() string {
	return fmt.Sprintf("order %d (user %d, voucher %d)", o.id, o.userID, o.voucherID)
}

// OrderState is where a claimed order is on its way to the database, then in its lifecycle.
type OrderState string

const (
	OrderQueued  OrderState = "queued"  // claimed in Redis, not yet in the database
	OrderCreated OrderState = "created" // committed in tb_voucher_order, not paid yet
	OrderFailed  OrderState = "failed"  // rejected for good, with a FailureReason
)

// FailureReason says why the database refused an order for good.
type FailureReason string

const (
	FailOutOfStock    FailureReason = "out_of_stock"      // the guarded decrement found no stock
	FailDuplicate     FailureReason = "duplicate"         // the user already holds an order of the voucher
	FailVoucherGone   FailureReason = "voucher_not_found" // no such voucher in the database
	FailIDConflict    FailureReason = "id_conflict"       // another order has this ID (a sequence reset)
	FailUndeliverable FailureReason = "undeliverable"     // the queue gave up on the message
	FailRefused       FailureReason = "refused"           // the database refused the data for good
)

func ParseFailureReason(s string) (FailureReason, error) {
	return parseEnum(s, "reason", "failure reason",
		FailOutOfStock, FailDuplicate, FailVoucherGone, FailIDConflict, FailUndeliverable, FailRefused)
}

// ReleasesBuyer tells whether the failure leaves the user holding no order of the voucher.
func (r FailureReason) ReleasesBuyer() bool { return r != FailDuplicate }

// ReturnsStock tells whether the gate gets the unit back: the database never sold it.
func (r FailureReason) ReturnsStock() bool {
	return r == FailUndeliverable || r == FailIDConflict || r == FailRefused
}

type OrderStatus struct {
	Order     VoucherOrder
	State     OrderState
	Reason    FailureReason // set when State is OrderFailed
	Lifecycle               // zero for a queued or failed order
}

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
