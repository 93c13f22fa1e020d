package domain

import (
	"maps"
	"slices"
)

// Outcome is what recording one order of a batch came to (ports.Outcome is
// this type).
type Outcome struct {
	Order  VoucherOrder
	State  OrderState // OrderCreated or OrderFailed
	Reason FailureReason
	// New is false when the outcome was already recorded by an earlier delivery.
	New bool
	// Cause is what the database said when it refused this order alone
	// (Reason FailRefused); nil otherwise. For logs and operators.
	Cause error
}

// BatchState is what a store holds that a batch's outcomes depend on. A
// repository reads it under the lock (transaction, row locks, mutex) that
// keeps it true until the plan made from it is written, in the way Wild
// Workouts' UpdateHour keeps the rule in the domain while the repository locks.
type BatchState struct {
	// Recorded is the outcome recorded under each of the batch's order IDs
	// that has one.
	Recorded map[OrderID]OrderStatus
	// Stock is the remaining stock of each of the batch's vouchers that has
	// a sale; a voucher without an entry has none (it is gone).
	Stock map[VoucherID]int
	// Holders is, per voucher and user, the slots of the user's orders that
	// hold a place in the sale (one each, 1..the limit; a cancelled order
	// keeps its place unless it was reclaimable). It must cover the batch's
	// users; it may hold more.
	Holders map[VoucherID]map[UserID][]int
	// Limits is each voucher's limit per user (Sale.LimitPerUser); a voucher
	// without an entry (or below 1) allows one order per user.
	Limits map[VoucherID]int
}

// BatchPlan is what a batch comes to: each order's outcome, and the writes
// that record them. The store applies the writes as one unit, or none.
type BatchPlan struct {
	// Outcomes has one entry per input order, in input order.
	Outcomes []Outcome
	// Created are the orders to insert.
	Created []VoucherOrder
	// Failures are the new failures to record. An id_conflict is never
	// among them: the ID's row belongs to the other order.
	Failures []Outcome
	// Taken is how many units to take from each voucher's stock; it is never
	// more than the voucher's Stock in the state the plan was made from.
	Taken map[VoucherID]int
	// Slots is the slot of each created order: the lowest of 1..the limit
	// that none of its user's places in the sale holds. A store keeps it
	// with the order, under a unique key on (user, voucher, slot) over the
	// orders holding a place, so the database too refuses a place too many.
	Slots map[OrderID]int
}

// PlanBatch decides the outcome of every order of a batch, in input order,
// from what the store holds. Each order is:
//   - already recorded under its ID (or earlier in this batch): its recorded
//     outcome again, New=false;
//   - an ID recorded for another user or voucher: failed id_conflict;
//   - of a voucher without a sale: failed voucher_not_found;
//   - of a user who holds as many places in the voucher's sale as its limit
//     per user (counting orders created earlier in this batch): failed
//     duplicate;
//   - past the remaining stock: failed out_of_stock;
//   - otherwise created, taking one unit and the user's lowest free slot.
//
// The checks come in that order, so a redelivery is answered by its record
// whatever has changed since, and a user is told duplicate rather than
// out_of_stock. st is only read.
func PlanBatch(orders []VoucherOrder, st BatchState) BatchPlan {
	plan := BatchPlan{Outcomes: make([]Outcome, 0, len(orders)), Taken: map[VoucherID]int{}, Slots: map[OrderID]int{}}
	first := map[OrderID]int{}                 // where an ID first appears in this batch
	buyers := map[VoucherID]map[UserID][]int{} // slots this batch gave each user
	for _, o := range orders {
		if i, seen := first[o.ID()]; seen {
			// Delivered twice in one batch: the later copy is a redelivery
			// of the earlier one.
			prev := plan.Outcomes[i]
			plan.Outcomes = append(plan.Outcomes, OrderStatus{Order: prev.Order, State: prev.State, Reason: prev.Reason}.Redelivery(o))
			continue
		}
		first[o.ID()] = len(plan.Outcomes)

		v, u := o.VoucherID(), o.UserID()
		rec, recorded := st.Recorded[o.ID()]
		left, onSale := st.Stock[v]
		held, given := st.Holders[v][u], buyers[v][u]
		limit := max(st.Limits[v], 1)
		var out Outcome
		switch {
		case recorded:
			out = rec.Redelivery(o)
		case !onSale:
			out = plan.fail(o, FailVoucherGone)
		case len(held)+len(given) >= limit:
			out = plan.fail(o, FailDuplicate)
		case left-plan.Taken[v] <= 0:
			out = plan.fail(o, FailOutOfStock)
		default:
			plan.Taken[v]++
			if buyers[v] == nil {
				buyers[v] = map[UserID][]int{}
			}
			slot := freeSlot(held, given)
			buyers[v][u] = append(given, slot)
			plan.Slots[o.ID()] = slot
			plan.Created = append(plan.Created, o)
			out = Outcome{Order: o, State: OrderCreated, New: true}
		}
		plan.Outcomes = append(plan.Outcomes, out)
	}
	return plan
}

// freeSlot is the lowest slot from 1 up that neither held nor given takes.
// The caller has checked they take fewer than the limit, so it is within it
// (a slot above the limit, were one stored, only counts against it).
func freeSlot(held, given []int) int {
	slot := 1
	for slices.Contains(held, slot) || slices.Contains(given, slot) {
		slot++
	}
	return slot
}

// PlanFailures decides what recording orders as failed for reason comes to,
// given the outcomes recorded under their IDs: an order already recorded
// (also earlier in this batch) keeps its outcome, New=false; an ID recorded
// for another order is an id_conflict, not recorded; any other order is a new
// failure. It takes no stock and creates nothing.
func PlanFailures(orders []VoucherOrder, reason FailureReason, recorded map[OrderID]OrderStatus) BatchPlan {
	plan := BatchPlan{Outcomes: make([]Outcome, 0, len(orders))}
	seen := make(map[OrderID]OrderStatus, len(recorded)+len(orders)) // recorded, and the failures this plan records
	maps.Copy(seen, recorded)
	for _, o := range orders {
		if rec, ok := seen[o.ID()]; ok {
			plan.Outcomes = append(plan.Outcomes, rec.Redelivery(o))
			continue
		}
		seen[o.ID()] = OrderStatus{Order: o, State: OrderFailed, Reason: reason}
		plan.Outcomes = append(plan.Outcomes, plan.fail(o, reason))
	}
	return plan
}

// fail is a new failure of o, to be recorded.
func (p *BatchPlan) fail(o VoucherOrder, reason FailureReason) Outcome {
	out := Outcome{Order: o, State: OrderFailed, Reason: reason, New: true}
	p.Failures = append(p.Failures, out)
	return out
}

// Redelivery is the outcome of delivering o again when st is recorded under
// its ID: the record, not new, if it is o's (created, whatever its lifecycle
// did since: paid or cancelled, it was created once; or its failure); a new
// id_conflict, which is not recorded, if the ID belongs to another order.
func (st OrderStatus) Redelivery(o VoucherOrder) Outcome {
	switch {
	case st.Order != o:
		return Outcome{Order: o, State: OrderFailed, Reason: FailIDConflict, New: true}
	case st.State == OrderFailed:
		return Outcome{Order: o, State: OrderFailed, Reason: st.Reason}
	}
	return Outcome{Order: o, State: OrderCreated}
}
