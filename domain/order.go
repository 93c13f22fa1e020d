package domain

import (
	"fmt"
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
