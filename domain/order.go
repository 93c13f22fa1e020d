package domain

import (
	"fmt"
	"time"
)

// OrderID keeps the original's layout: seconds since 2022-01-01 UTC in the high
// 31 bits, a 32-bit sequence in the low bits. IDs from one sequence are unique;
// they exceed 2^53, so they travel as JSON strings.
type OrderID int64

// OrderEpoch is the zero of an OrderID's timestamp.
var OrderEpoch = time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)

const seqBits = 32

// NewOrderID builds an ID from the time it is issued and a sequence number.
func NewOrderID(at time.Time, seq uint32) (OrderID, error) {
	secs := at.Unix() - OrderEpoch.Unix()
	if secs < 0 || secs >= 1<<31 {
		return 0, invalid("orderId", "time %s is outside the ID range", at.UTC().Format(time.RFC3339))
	}
	return OrderID(secs<<seqBits | int64(seq)), nil
}

// Time is the second the ID was issued.
func (id OrderID) Time() time.Time {
	return OrderEpoch.Add(time.Duration(int64(id)>>seqBits) * time.Second)
}

// Seq is the ID's sequence number.
func (id OrderID) Seq() uint32 { return uint32(id) }

// VoucherOrder is one user's claim of one seckill voucher.
type VoucherOrder struct {
	id        OrderID
	userID    UserID
	voucherID VoucherID
	forfeited bool
}

// NewVoucherOrder validates the three IDs a claim is made of.
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

// Forfeited returns the order as one that gave its unit back (expired or
// cancelled) while its buyer keeps the place: the user still counts as the
// sale's buyer, so a claim answers duplicate (DESIGN.md's rule, unless the
// shop lets a cancel free the buyer).
func (o VoucherOrder) Forfeited() VoucherOrder { o.forfeited = true; return o }

// HoldsUnit tells whether the order holds its unit (false for a forfeited one).
func (o VoucherOrder) HoldsUnit() bool { return !o.forfeited }

func (o VoucherOrder) String() string {
	return fmt.Sprintf("order %d (user %d, voucher %d)", o.id, o.userID, o.voucherID)
}

// OrderState is where a claimed order is on its way to the database, and
// then in its lifecycle (lifecycle.go).
type OrderState string

const (
	OrderQueued  OrderState = "queued"  // claimed in Redis, not yet in the database
	OrderCreated OrderState = "created" // committed in tb_voucher_order, not paid yet
	OrderFailed  OrderState = "failed"  // rejected for good, with a FailureReason
)

// FailureReason says why the database refused an order for good.
type FailureReason string

const (
	// FailOutOfStock: the database's guarded decrement found no stock left.
	FailOutOfStock FailureReason = "out_of_stock"
	// FailDuplicate: the user already holds another order for this voucher.
	FailDuplicate FailureReason = "duplicate"
	// FailVoucherGone: the voucher is not (or no longer) in the database.
	FailVoucherGone FailureReason = "voucher_not_found"
	// FailIDConflict: another order already has this ID (a sequence reset).
	FailIDConflict FailureReason = "id_conflict"
	// FailUndeliverable: the queue gave up on the message (poison or too many deliveries).
	FailUndeliverable FailureReason = "undeliverable"
	// FailRefused: the database refused this order's data for good (an error
	// no retry can fix); nothing of it was written.
	FailRefused FailureReason = "refused"
)

// ParseFailureReason accepts only the reasons above.
func ParseFailureReason(s string) (FailureReason, error) {
	return parseEnum(s, "reason", "failure reason", FailOutOfStock, FailDuplicate, FailVoucherGone, FailIDConflict, FailUndeliverable, FailRefused)
}

// ReleasesBuyer tells whether a failure frees the user to claim again: true when
// the user ends up holding no order for the voucher.
func (r FailureReason) ReleasesBuyer() bool {
	return r != FailDuplicate
}

// ReturnsStock tells whether the gate should get the order's unit back: true
// when the database never sold it and may still have it to sell. An
// out_of_stock order has no unit in the database to return, and a duplicate's
// user still holds one.
func (r FailureReason) ReturnsStock() bool {
	return r == FailUndeliverable || r == FailIDConflict || r == FailRefused
}

// OrderStatus is an order with where it stands.
type OrderStatus struct {
	Order  VoucherOrder
	State  OrderState
	Reason FailureReason // set when State is OrderFailed
	// Lifecycle is what the database records of a created order's payment
	// and cancellation (zero for a queued or failed one).
	Lifecycle
}
