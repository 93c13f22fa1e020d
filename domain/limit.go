package domain

import (
	"fmt"
	"slices"
)

// MaxLimitPerUser keeps small the claim's cost, which looks at each of a buyer's places.
const MaxLimitPerUser = 10

// LimitPerUser is how many orders of the sale one user may hold, cancelled ones included.
func (s Sale) LimitPerUser() int { return max(s.limit, 1) }

// WithLimitPerUser returns the sale allowing n orders per user; one with a waiting room keeps 1.
func (s Sale) WithLimitPerUser(n int) (Sale, error) {
	switch {
	case n < 1 || n > MaxLimitPerUser:
		return Sale{}, invalid("limitPerUser", "must be between 1 and %d, got %d", MaxLimitPerUser, n)
	case n > 1 && s.HasRoom():
		return Sale{}, invalid("limitPerUser",
			"must be 1 for a sale with a waiting room (a pass admits one order), got %d", n)
	}
	s.limit = unsplit(n)
	return s, nil
}

// WithStoredLimit is the sale with its stored limit per user. Use it only in repositories.
func (s Sale) WithStoredLimit(n int) Sale { s.limit = unsplit(n); return s }

// BuyerMarks turns v's orders into each user's marks, refusing an order of another voucher or
// a user past the limit (a gate rebuilt from them would be wrong). A repeated id counts once.
func BuyerMarks(v Voucher, orders []VoucherOrder) (map[UserID][]OrderID, error) {
	limit := v.sale.LimitPerUser()
	marks := make(map[UserID][]OrderID, len(orders))
	seen := make(map[OrderID]bool, len(orders))
	for _, o := range orders {
		if o.voucherID != v.id {
			return nil, fmt.Errorf("voucher %d: buyer %s belongs to another voucher", v.id, o)
		}
		if seen[o.id] {
			continue
		}
		seen[o.id] = true
		if len(marks[o.userID]) >= limit {
			return nil, fmt.Errorf("voucher %d: user %d holds orders %v and %d, more than the limit of %d",
				v.id, o.userID, marks[o.userID], o.id, limit)
		}
		marks[o.userID] = append(marks[o.userID], o.Mark())
	}
	return marks, nil
}

// KeepQueued adds to marks the places of orders still queued and reports how many; one past its
// user's limit is skipped (the database will refuse it), as refusing the rebuild leaves no gate.
func KeepQueued(marks map[UserID][]OrderID, s Sale, queued []VoucherOrder) int {
	added := 0
	for _, o := range queued {
		held := marks[o.userID]
		if len(held) >= s.LimitPerUser() || slices.Contains(held, o.id) || slices.Contains(held, -o.id) {
			continue
		}
		marks[o.userID] = append(held, o.Mark())
		added++
	}
	return added
}

// Mark is what the gate keeps in the order's place: its id, negated once forfeited
// (it still counts toward the limit, and no return can give its unit back twice).
func (o VoucherOrder) Mark() OrderID {
	if o.forfeited {
		return -o.id
	}
	return o.id
}
