package domain

import (
	"fmt"
	"slices"
)

// MaxLimitPerUser bounds how many orders of one sale a user may hold. The
// gate's claim looks at each of a buyer's places when the first is taken, so
// the bound keeps a repeated claim's cost small; shops selling more than a
// handful of units to one buyer are not running a flash sale.
const MaxLimitPerUser = 10

// LimitPerUser is how many orders of the sale one user may hold (1, the
// default: hmdp's one order per user per voucher). Every order takes one
// unit; an expired or cancelled order keeps counting, as with one.
func (s Sale) LimitPerUser() int { return max(s.limit, 1) }

// WithLimitPerUser returns the sale allowing n orders per user,
// 1..MaxLimitPerUser. A sale with a waiting room keeps one: a pass admits one
// order, and the room's fairness is one place in line per account.
func (s Sale) WithLimitPerUser(n int) (Sale, error) {
	switch {
	case n < 1 || n > MaxLimitPerUser:
		return Sale{}, invalid("limitPerUser", "must be between 1 and %d, got %d", MaxLimitPerUser, n)
	case n > 1 && s.HasRoom():
		return Sale{}, invalid("limitPerUser", "must be 1 for a sale with a waiting room (a pass admits one order), got %d", n)
	}
	s.limit = unsplit(n)
	return s, nil
}

// WithStoredLimit is the sale with its stored limit per user. Use it only in
// repositories.
func (s Sale) WithStoredLimit(n int) Sale { s.limit = unsplit(n); return s }

// BuyerMarks turns voucher v's orders into its buyers' marks: per user, the
// marks of the orders that hold a place (Mark: negative for a forfeited order:
// its buyer keeps the place, and no return can give its unit back twice). It
// refuses an order of another voucher, one id twice, and a user with more
// orders than the sale's limit: any of them would make a gate rebuilt from
// them wrong.
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
			return nil, fmt.Errorf("voucher %d: user %d holds orders %v and %d, more than the limit of %d", v.id, o.userID, marks[o.userID], o.id, limit)
		}
		marks[o.userID] = append(marks[o.userID], o.Mark())
	}
	return marks, nil
}

// KeepQueued gives the buyers of orders still queued (orders of the marks'
// voucher, sold by the gate and not yet in the database) their places in
// marks, as their claims took them, so a gate rebuilt while they wait does
// not let them claim again. An order already marked is skipped, and so is
// one past its user's limit in sale s: the database will refuse it as a
// duplicate, and refusing the whole rebuild for it, as BuyerMarks does for
// the database's orders, would leave the sale without a gate. It reports
// how many places it added.
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

// Mark is what the gate keeps for the order in its buyer's place: its id, or
// the id negated once the order was cancelled and forfeited the place (it
// still counts toward the user's limit, and still names its order).
func (o VoucherOrder) Mark() OrderID {
	if o.forfeited {
		return -o.id
	}
	return o.id
}
