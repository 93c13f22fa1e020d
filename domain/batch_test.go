package domain_test

import (
	"maps"
	"reflect"
	"testing"

	"github.com/hmdp-go/seckill/domain"
)

func order(t *testing.T, id, user, voucher int64) domain.VoucherOrder {
	t.Helper()
	o, err := domain.NewVoucherOrder(domain.OrderID(id), domain.UserID(user), domain.VoucherID(voucher))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func created(o domain.VoucherOrder, isNew bool) domain.Outcome {
	return domain.Outcome{Order: o, State: domain.OrderCreated, New: isNew}
}

func failed(o domain.VoucherOrder, r domain.FailureReason, isNew bool) domain.Outcome {
	return domain.Outcome{Order: o, State: domain.OrderFailed, Reason: r, New: isNew}
}

func TestPlanBatch(t *testing.T) {
	var (
		a1  = order(t, 1, 1, 10) // user 1, voucher 10
		a2  = order(t, 2, 2, 10)
		a3  = order(t, 3, 3, 10)
		b1  = order(t, 4, 1, 20) // user 1, voucher 20
		g1  = order(t, 5, 4, 30) // voucher 30 has no sale
		a1x = order(t, 1, 9, 10) // a1's ID, another user
		a2y = order(t, 6, 2, 10) // user 2's second order of voucher 10
	)
	recordedCreated := domain.OrderStatus{Order: a1, State: domain.OrderCreated}
	recordedFailed := domain.OrderStatus{Order: a1, State: domain.OrderFailed, Reason: domain.FailOutOfStock}
	tests := []struct {
		name         string
		orders       []domain.VoucherOrder
		st           domain.BatchState
		wantOutcomes []domain.Outcome
		wantCreated  []domain.VoucherOrder
		wantFailures []domain.Outcome
		wantTaken    map[domain.VoucherID]int
	}{
		{
			name:         "new_order_is_created_and_takes_a_unit",
			orders:       []domain.VoucherOrder{a1},
			st:           domain.BatchState{Stock: map[domain.VoucherID]int{10: 2}},
			wantOutcomes: []domain.Outcome{created(a1, true)},
			wantCreated:  []domain.VoucherOrder{a1},
			wantTaken:    map[domain.VoucherID]int{10: 1},
		},
		{
			name:         "units_taken_per_voucher",
			orders:       []domain.VoucherOrder{a1, b1, a2},
			st:           domain.BatchState{Stock: map[domain.VoucherID]int{10: 5, 20: 5}},
			wantOutcomes: []domain.Outcome{created(a1, true), created(b1, true), created(a2, true)},
			wantCreated:  []domain.VoucherOrder{a1, b1, a2},
			wantTaken:    map[domain.VoucherID]int{10: 2, 20: 1},
		},
		{
			name:         "replay_of_created_order",
			orders:       []domain.VoucherOrder{a1},
			st:           domain.BatchState{Recorded: map[domain.OrderID]domain.OrderStatus{1: recordedCreated}, Stock: map[domain.VoucherID]int{10: 2}},
			wantOutcomes: []domain.Outcome{created(a1, false)},
			wantTaken:    map[domain.VoucherID]int{},
		},
		{
			name:         "replay_of_failed_order_keeps_its_reason",
			orders:       []domain.VoucherOrder{a1},
			st:           domain.BatchState{Recorded: map[domain.OrderID]domain.OrderStatus{1: recordedFailed}, Stock: map[domain.VoucherID]int{10: 2}},
			wantOutcomes: []domain.Outcome{failed(a1, domain.FailOutOfStock, false)},
			wantTaken:    map[domain.VoucherID]int{},
		},
		{
			name:         "replay_answered_by_record_after_voucher_is_gone",
			orders:       []domain.VoucherOrder{a1},
			st:           domain.BatchState{Recorded: map[domain.OrderID]domain.OrderStatus{1: recordedCreated}},
			wantOutcomes: []domain.Outcome{created(a1, false)},
			wantTaken:    map[domain.VoucherID]int{},
		},
		{
			name:         "id_of_another_order_is_a_conflict_not_recorded",
			orders:       []domain.VoucherOrder{a1x},
			st:           domain.BatchState{Recorded: map[domain.OrderID]domain.OrderStatus{1: recordedCreated}, Stock: map[domain.VoucherID]int{10: 2}},
			wantOutcomes: []domain.Outcome{failed(a1x, domain.FailIDConflict, true)},
			wantTaken:    map[domain.VoucherID]int{},
		},
		{
			name:         "voucher_without_sale_is_gone",
			orders:       []domain.VoucherOrder{g1},
			st:           domain.BatchState{Stock: map[domain.VoucherID]int{10: 2}},
			wantOutcomes: []domain.Outcome{failed(g1, domain.FailVoucherGone, true)},
			wantFailures: []domain.Outcome{failed(g1, domain.FailVoucherGone, true)},
			wantTaken:    map[domain.VoucherID]int{},
		},
		{
			name:   "user_holding_an_order_is_a_duplicate",
			orders: []domain.VoucherOrder{a2y},
			st: domain.BatchState{
				Stock:   map[domain.VoucherID]int{10: 2},
				Holders: map[domain.VoucherID]map[domain.UserID][]int{10: {2: {1}}},
			},
			wantOutcomes: []domain.Outcome{failed(a2y, domain.FailDuplicate, true)},
			wantFailures: []domain.Outcome{failed(a2y, domain.FailDuplicate, true)},
			wantTaken:    map[domain.VoucherID]int{},
		},
		{
			name:         "second_order_of_a_user_in_one_batch_is_a_duplicate",
			orders:       []domain.VoucherOrder{a2, a2y},
			st:           domain.BatchState{Stock: map[domain.VoucherID]int{10: 5}},
			wantOutcomes: []domain.Outcome{created(a2, true), failed(a2y, domain.FailDuplicate, true)},
			wantCreated:  []domain.VoucherOrder{a2},
			wantFailures: []domain.Outcome{failed(a2y, domain.FailDuplicate, true)},
			wantTaken:    map[domain.VoucherID]int{10: 1},
		},
		{
			name:   "holder_of_another_voucher_is_not_a_duplicate",
			orders: []domain.VoucherOrder{b1},
			st: domain.BatchState{
				Stock:   map[domain.VoucherID]int{20: 1},
				Holders: map[domain.VoucherID]map[domain.UserID][]int{10: {1: {1}}},
			},
			wantOutcomes: []domain.Outcome{created(b1, true)},
			wantCreated:  []domain.VoucherOrder{b1},
			wantTaken:    map[domain.VoucherID]int{20: 1},
		},
		{
			name:         "no_stock_left_is_out_of_stock",
			orders:       []domain.VoucherOrder{a1},
			st:           domain.BatchState{Stock: map[domain.VoucherID]int{10: 0}},
			wantOutcomes: []domain.Outcome{failed(a1, domain.FailOutOfStock, true)},
			wantFailures: []domain.Outcome{failed(a1, domain.FailOutOfStock, true)},
			wantTaken:    map[domain.VoucherID]int{},
		},
		{
			name:         "stock_runs_out_where_the_input_says",
			orders:       []domain.VoucherOrder{a1, a2, a3},
			st:           domain.BatchState{Stock: map[domain.VoucherID]int{10: 2}},
			wantOutcomes: []domain.Outcome{created(a1, true), created(a2, true), failed(a3, domain.FailOutOfStock, true)},
			wantCreated:  []domain.VoucherOrder{a1, a2},
			wantFailures: []domain.Outcome{failed(a3, domain.FailOutOfStock, true)},
			wantTaken:    map[domain.VoucherID]int{10: 2},
		},
		{
			name:   "duplicate_is_checked_before_stock",
			orders: []domain.VoucherOrder{a2y},
			st: domain.BatchState{
				Stock:   map[domain.VoucherID]int{10: 0},
				Holders: map[domain.VoucherID]map[domain.UserID][]int{10: {2: {1}}},
			},
			wantOutcomes: []domain.Outcome{failed(a2y, domain.FailDuplicate, true)},
			wantFailures: []domain.Outcome{failed(a2y, domain.FailDuplicate, true)},
			wantTaken:    map[domain.VoucherID]int{},
		},
		{
			name:         "same_order_twice_in_a_batch_is_a_replay",
			orders:       []domain.VoucherOrder{a1, a1},
			st:           domain.BatchState{Stock: map[domain.VoucherID]int{10: 5}},
			wantOutcomes: []domain.Outcome{created(a1, true), created(a1, false)},
			wantCreated:  []domain.VoucherOrder{a1},
			wantTaken:    map[domain.VoucherID]int{10: 1},
		},
		{
			name:         "same_failed_order_twice_is_recorded_once",
			orders:       []domain.VoucherOrder{g1, g1},
			st:           domain.BatchState{},
			wantOutcomes: []domain.Outcome{failed(g1, domain.FailVoucherGone, true), failed(g1, domain.FailVoucherGone, false)},
			wantFailures: []domain.Outcome{failed(g1, domain.FailVoucherGone, true)},
			wantTaken:    map[domain.VoucherID]int{},
		},
		{
			name:         "id_reused_within_a_batch_is_a_conflict",
			orders:       []domain.VoucherOrder{a1, a1x},
			st:           domain.BatchState{Stock: map[domain.VoucherID]int{10: 5}},
			wantOutcomes: []domain.Outcome{created(a1, true), failed(a1x, domain.FailIDConflict, true)},
			wantCreated:  []domain.VoucherOrder{a1},
			wantTaken:    map[domain.VoucherID]int{10: 1},
		},
		{
			name:         "empty_batch",
			st:           domain.BatchState{},
			wantOutcomes: []domain.Outcome{},
			wantTaken:    map[domain.VoucherID]int{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stock := maps.Clone(tt.st.Stock)
			plan := domain.PlanBatch(tt.orders, tt.st)
			if !reflect.DeepEqual(plan.Outcomes, tt.wantOutcomes) {
				t.Errorf("outcomes = %+v\nwant       %+v", plan.Outcomes, tt.wantOutcomes)
			}
			if !reflect.DeepEqual(plan.Created, tt.wantCreated) {
				t.Errorf("created = %v, want %v", plan.Created, tt.wantCreated)
			}
			if !reflect.DeepEqual(plan.Failures, tt.wantFailures) {
				t.Errorf("failures = %+v, want %+v", plan.Failures, tt.wantFailures)
			}
			if !reflect.DeepEqual(plan.Taken, tt.wantTaken) {
				t.Errorf("taken = %v, want %v", plan.Taken, tt.wantTaken)
			}
			if !maps.Equal(tt.st.Stock, stock) {
				t.Errorf("the plan changed the state's stock: %v -> %v", stock, tt.st.Stock)
			}
			// With no limits every created order takes slot 1, as the one
			// order per user always did.
			for _, o := range tt.wantCreated {
				if plan.Slots[o.ID()] != 1 {
					t.Errorf("order %d: slot %d, want 1", o.ID(), plan.Slots[o.ID()])
				}
			}
			if len(plan.Slots) != len(tt.wantCreated) {
				t.Errorf("slots = %v, want one per created order %v", plan.Slots, tt.wantCreated)
			}
		})
	}
}

// A sale's limit per user: a user holds up to that many places, each order
// in the lowest slot its user's places leave free.
func TestPlanBatchLimitPerUser(t *testing.T) {
	o := func(id, user int64) domain.VoucherOrder { return order(t, id, user, 10) }
	var (
		u1a, u1b, u1c, u1d = o(1, 1), o(2, 1), o(3, 1), o(4, 1)
		u2a                = o(5, 2)
	)
	type slots = map[domain.OrderID]int
	tests := []struct {
		name         string
		orders       []domain.VoucherOrder
		limit        int                     // of voucher 10; 0: no entry
		held         map[domain.UserID][]int // voucher 10's places
		stock        int
		wantOutcomes []domain.Outcome
		wantSlots    slots
		wantTaken    int
	}{
		{
			name: "no_limit_entry_is_one_order_per_user", orders: []domain.VoucherOrder{u1a, u1b}, stock: 5,
			wantOutcomes: []domain.Outcome{created(u1a, true), failed(u1b, domain.FailDuplicate, true)},
			wantSlots:    slots{1: 1}, wantTaken: 1,
		},
		{
			name: "limit_one_holder_is_a_duplicate", orders: []domain.VoucherOrder{u1a}, limit: 1, stock: 5,
			held:         map[domain.UserID][]int{1: {1}},
			wantOutcomes: []domain.Outcome{failed(u1a, domain.FailDuplicate, true)},
			wantSlots:    slots{},
		},
		{
			name: "limit_three_allows_three_then_duplicate", orders: []domain.VoucherOrder{u1a, u1b, u1c, u1d, u2a}, limit: 3, stock: 10,
			wantOutcomes: []domain.Outcome{created(u1a, true), created(u1b, true), created(u1c, true),
				failed(u1d, domain.FailDuplicate, true), created(u2a, true)},
			wantSlots: slots{1: 1, 2: 2, 3: 3, 5: 1}, wantTaken: 4,
		},
		{
			name: "places_held_count_with_those_of_the_batch", orders: []domain.VoucherOrder{u1a, u1b}, limit: 3, stock: 10,
			held:         map[domain.UserID][]int{1: {1, 2}},
			wantOutcomes: []domain.Outcome{created(u1a, true), failed(u1b, domain.FailDuplicate, true)},
			wantSlots:    slots{1: 3}, wantTaken: 1,
		},
		{
			// Slot 1's order was cancelled with its place reclaimable: it
			// is not among the held, and the next order takes its slot.
			name: "the_lowest_free_slot_is_taken", orders: []domain.VoucherOrder{u1a, u1b}, limit: 3, stock: 10,
			held:         map[domain.UserID][]int{1: {2}},
			wantOutcomes: []domain.Outcome{created(u1a, true), created(u1b, true)},
			wantSlots:    slots{1: 1, 2: 3}, wantTaken: 2,
		},
		{
			name: "a_full_user_is_told_duplicate_before_out_of_stock", orders: []domain.VoucherOrder{u1a, u2a}, limit: 2, stock: 0,
			held:         map[domain.UserID][]int{1: {1, 2}},
			wantOutcomes: []domain.Outcome{failed(u1a, domain.FailDuplicate, true), failed(u2a, domain.FailOutOfStock, true)},
			wantSlots:    slots{},
		},
		{
			name: "stock_bounds_a_users_orders", orders: []domain.VoucherOrder{u1a, u1b, u1c}, limit: 3, stock: 2,
			wantOutcomes: []domain.Outcome{created(u1a, true), created(u1b, true), failed(u1c, domain.FailOutOfStock, true)},
			wantSlots:    slots{1: 1, 2: 2}, wantTaken: 2,
		},
		{
			// A redelivery takes no second place, even in the same batch.
			name: "redelivery_is_its_record_and_takes_no_place", orders: []domain.VoucherOrder{u1a, u1a, u1b}, limit: 2, stock: 5,
			held:         map[domain.UserID][]int{1: {1}},
			wantOutcomes: []domain.Outcome{created(u1a, true), created(u1a, false), failed(u1b, domain.FailDuplicate, true)},
			wantSlots:    slots{1: 2}, wantTaken: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := domain.BatchState{
				Stock:   map[domain.VoucherID]int{10: tt.stock},
				Holders: map[domain.VoucherID]map[domain.UserID][]int{10: tt.held},
			}
			if tt.limit > 0 {
				st.Limits = map[domain.VoucherID]int{10: tt.limit}
			}
			plan := domain.PlanBatch(tt.orders, st)
			if !reflect.DeepEqual(plan.Outcomes, tt.wantOutcomes) {
				t.Errorf("outcomes = %+v\nwant       %+v", plan.Outcomes, tt.wantOutcomes)
			}
			if !maps.Equal(plan.Slots, tt.wantSlots) {
				t.Errorf("slots = %v, want %v", plan.Slots, tt.wantSlots)
			}
			if plan.Taken[10] != tt.wantTaken || len(plan.Created) != len(tt.wantSlots) {
				t.Errorf("taken %d, created %v; want %d taken, %d created", plan.Taken[10], plan.Created, tt.wantTaken, len(tt.wantSlots))
			}
		})
	}
	// A recorded order is its record: the same order, already created,
	// takes no place and gets no slot.
	st := domain.BatchState{
		Recorded: map[domain.OrderID]domain.OrderStatus{1: {Order: u1a, State: domain.OrderCreated}},
		Stock:    map[domain.VoucherID]int{10: 5},
		Holders:  map[domain.VoucherID]map[domain.UserID][]int{10: {1: {1}}},
		Limits:   map[domain.VoucherID]int{10: 2},
	}
	plan := domain.PlanBatch([]domain.VoucherOrder{u1a, u1b}, st)
	if want := []domain.Outcome{created(u1a, false), created(u1b, true)}; !reflect.DeepEqual(plan.Outcomes, want) ||
		!maps.Equal(plan.Slots, map[domain.OrderID]int{2: 2}) {
		t.Fatalf("outcomes %+v, slots %v; want %+v with order 2 in slot 2", plan.Outcomes, plan.Slots, want)
	}
}

// A plan only reads the state: a store can hand it its own maps.
func TestPlanBatchLeavesStateAlone(t *testing.T) {
	a1, a2 := order(t, 1, 1, 10), order(t, 2, 2, 10)
	st := domain.BatchState{
		Recorded: map[domain.OrderID]domain.OrderStatus{},
		Stock:    map[domain.VoucherID]int{10: 5},
		Holders:  map[domain.VoucherID]map[domain.UserID][]int{10: {}},
	}
	domain.PlanBatch([]domain.VoucherOrder{a1, a2}, st)
	if len(st.Recorded) != 0 || st.Stock[10] != 5 || len(st.Holders[10]) != 0 {
		t.Fatalf("state changed: %+v", st)
	}
}

func TestPlanFailures(t *testing.T) {
	var (
		fresh    = order(t, 1, 1, 10)
		done     = order(t, 2, 2, 10)
		refused  = order(t, 3, 3, 10)
		conflict = order(t, 2, 9, 10) // done's ID, another user
		reused   = order(t, 1, 8, 10) // fresh's ID, another user
	)
	recorded := map[domain.OrderID]domain.OrderStatus{
		2: {Order: done, State: domain.OrderCreated},
		3: {Order: refused, State: domain.OrderFailed, Reason: domain.FailDuplicate},
	}
	undeliverable := func(o domain.VoucherOrder, isNew bool) domain.Outcome {
		return failed(o, domain.FailUndeliverable, isNew)
	}
	tests := []struct {
		name         string
		orders       []domain.VoucherOrder
		wantOutcomes []domain.Outcome
		wantFailures []domain.Outcome
	}{
		{
			name:         "unrecorded_order_fails_for_the_reason",
			orders:       []domain.VoucherOrder{fresh},
			wantOutcomes: []domain.Outcome{undeliverable(fresh, true)},
			wantFailures: []domain.Outcome{undeliverable(fresh, true)},
		},
		{
			name:         "created_order_stays_created",
			orders:       []domain.VoucherOrder{done},
			wantOutcomes: []domain.Outcome{created(done, false)},
		},
		{
			name:         "failed_order_keeps_its_reason",
			orders:       []domain.VoucherOrder{refused},
			wantOutcomes: []domain.Outcome{failed(refused, domain.FailDuplicate, false)},
		},
		{
			name:         "id_of_another_order_is_a_conflict_not_recorded",
			orders:       []domain.VoucherOrder{conflict},
			wantOutcomes: []domain.Outcome{failed(conflict, domain.FailIDConflict, true)},
		},
		{
			name:         "same_order_twice_is_recorded_once",
			orders:       []domain.VoucherOrder{fresh, fresh},
			wantOutcomes: []domain.Outcome{undeliverable(fresh, true), undeliverable(fresh, false)},
			wantFailures: []domain.Outcome{undeliverable(fresh, true)},
		},
		{
			name:         "id_reused_within_a_batch_is_a_conflict",
			orders:       []domain.VoucherOrder{fresh, reused},
			wantOutcomes: []domain.Outcome{undeliverable(fresh, true), failed(reused, domain.FailIDConflict, true)},
			wantFailures: []domain.Outcome{undeliverable(fresh, true)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := domain.PlanFailures(tt.orders, domain.FailUndeliverable, recorded)
			if !reflect.DeepEqual(plan.Outcomes, tt.wantOutcomes) {
				t.Errorf("outcomes = %+v\nwant       %+v", plan.Outcomes, tt.wantOutcomes)
			}
			if !reflect.DeepEqual(plan.Failures, tt.wantFailures) {
				t.Errorf("failures = %+v, want %+v", plan.Failures, tt.wantFailures)
			}
			if len(plan.Created) != 0 || len(plan.Taken) != 0 {
				t.Errorf("a failure plan creates %v and takes %v", plan.Created, plan.Taken)
			}
			if len(recorded) != 2 {
				t.Errorf("the plan changed what is recorded: %v", recorded)
			}
		})
	}
}
