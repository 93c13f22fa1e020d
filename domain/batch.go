package domain

import (
	"maps"
	"slices"
)

// Outcome is what recording one order of a batch came to (ports.Outcome).
type Outcome struct {
	Order  VoucherOrder
	State  OrderState // OrderCreated or OrderFailed
	Reason FailureReason
	New    bool  // false: recorded by an earlier delivery
	Cause  error // what the database said when it refused this order alone (FailRefused)
}

// BatchState is what a batch's outcomes depend on, read under the lock that holds until the plan is written.
type BatchState struct {
	Recorded map[OrderID]OrderStatus        // the outcome recorded under each ID that has one
	Stock    map[VoucherID]int              // remaining stock of each voucher with a sale
	Holders  map[VoucherID]map[UserID][]int // slots of each user's places; covers the batch's users
	Limits   map[VoucherID]int              // Sale.LimitPerUser; absent or below 1: one
}

// BatchPlan is each order's outcome and the writes, applied all or none, that record them.
type BatchPlan struct {
	Outcomes []Outcome         // one per input order, in input order
	Created  []VoucherOrder    // the orders to insert
	Failures []Outcome         // new failures to record; never an id_conflict (the row is the other order's)
	Taken    map[VoucherID]int // units to take; never more than the state's Stock
	// Slots is each created order's lowest free slot in 1..the limit, kept under a unique key on
	// (user, voucher, slot) so the database too refuses a place too many.
	Slots map[OrderID]int
}

// PlanBatch decides each order's outcome, in input order, from st (only read), checking in this order:
//   - recorded under its ID (or earlier in this batch): that outcome, New=false;
//   - an ID recorded for another user or voucher: failed id_conflict;
//   - of a voucher without a sale: failed voucher_not_found;
//   - of a user holding as many places as the limit (with this batch's): duplicate;
//   - past the remaining stock: failed out_of_stock;
//   - otherwise created, taking one unit and the user's lowest free slot.
func PlanBatch(orders []VoucherOrder, st BatchState) BatchPlan {
	plan := BatchPlan{Outcomes: make([]Outcome, 0, len(orders)), Taken: map[VoucherID]int{}, Slots: map[OrderID]int{}}
	first := map[OrderID]int{}                 // where an ID first appears in this batch
	buyers := map[VoucherID]map[UserID][]int{} // slots this batch gave each user
	for _, o := range orders {
		if i, seen := first[o.ID()]; seen {
			prev := plan.Outcomes[i]
			plan.Outcomes = append(plan.Outcomes, OrderStatus{Order: prev.Order, State: prev.State, Reason: prev.Reason}.Redelivery(o))
			continue
		}
		first[o.ID()] = len(plan.Outcomes)
		v, u := o.VoucherID(), o.UserID()
		rec, recorded := st.Recorded[o.ID()]
		left, onSale := st.Stock[v]
		held, given := st.Holders[v][u], buyers[v][u]
		var out Outcome
		switch {
		case recorded:
			out = rec.Redelivery(o)
		case !onSale:
			out = plan.fail(o, FailVoucherGone)
		case len(held)+len(given) >= max(st.Limits[v], 1):
			out = plan.fail(o, FailDuplicate)
		case left-plan.Taken[v] <= 0:
			out = plan.fail(o, FailOutOfStock)
		default:
			plan.Taken[v]++
			if buyers[v] == nil {
				buyers[v] = map[UserID][]int{}
			}
			slot := 1
			for slices.Contains(held, slot) || slices.Contains(given, slot) {
				slot++
			}
			buyers[v][u] = append(given, slot)
			plan.Slots[o.ID()] = slot
			plan.Created = append(plan.Created, o)
			out = Outcome{Order: o, State: OrderCreated, New: true}
		}
		plan.Outcomes = append(plan.Outcomes, out)
	}
	return plan
}

// PlanFailures records orders as failed for reason, but for those already recorded
// (even earlier in this batch), whose Redelivery it answers. It takes no stock.
func PlanFailures(orders []VoucherOrder, reason FailureReason, recorded map[OrderID]OrderStatus) BatchPlan {
	plan := BatchPlan{Outcomes: make([]Outcome, 0, len(orders))}
	seen := make(map[OrderID]OrderStatus, len(recorded)+len(orders))
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

func (p *BatchPlan) fail(o VoucherOrder, reason FailureReason) Outcome {
	out := Outcome{Order: o, State: OrderFailed, Reason: reason, New: true}
	p.Failures = append(p.Failures, out)
	return out
}

// Redelivery answers o delivered again over st: st, not new, if it is o's; else an unrecorded id_conflict.
func (st OrderStatus) Redelivery(o VoucherOrder) Outcome {
	switch {
	case st.Order != o:
		return Outcome{Order: o, State: OrderFailed, Reason: FailIDConflict, New: true}
	case st.State == OrderFailed:
		return Outcome{Order: o, State: OrderFailed, Reason: st.Reason}
	}
	return Outcome{Order: o, State: OrderCreated}
}
