package domain

import "slices"

// OrderFilter selects a sale's orders by where they stand, for its
// operator's list and export. Its names are the operator's words: an unpaid
// order is the API's "created"; "cancelled" takes both reasons, "expired"
// only the orders the pay window cancelled. Failed claims are not orders of
// the sale (they never held a unit) and are not listed.
type OrderFilter string

const (
	AllOrders       OrderFilter = ""
	UnpaidOrders    OrderFilter = "unpaid"
	PaidOrders      OrderFilter = "paid"
	CancelledOrders OrderFilter = "cancelled"
	ExpiredOrders   OrderFilter = "expired"
	RefundingOrders OrderFilter = "refunding"
)

// OrderFilters are the filters ParseOrderFilter accepts, all but AllOrders.
var OrderFilters = []OrderFilter{UnpaidOrders, PaidOrders, CancelledOrders, ExpiredOrders, RefundingOrders}

// ParseOrderFilter accepts "" (every order) and the names above.
func ParseOrderFilter(s string) (OrderFilter, error) {
	if f := OrderFilter(s); f == AllOrders || slices.Contains(OrderFilters, f) {
		return f, nil
	}
	return "", invalid("state", "must be one of unpaid, paid, cancelled, expired, refunding (or omitted for all)")
}

// Matches tells whether a recorded order is one f selects.
func (f OrderFilter) Matches(st OrderStatus) bool {
	switch f {
	case AllOrders:
		return st.State != OrderFailed && st.State != OrderQueued
	case UnpaidOrders:
		return st.State == OrderCreated
	case PaidOrders:
		return st.State == OrderPaid
	case CancelledOrders:
		return st.State == OrderCancelled
	case ExpiredOrders:
		return st.State == OrderCancelled && st.CancelReason == CancelExpired
	case RefundingOrders:
		return st.State == OrderRefunding
	}
	return false
}
