package contract_test

import (
	"cmp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// repoLimitCases: a sale's limit per user (issue 40). A user holds up to that
// many places in the sale, one order and one unit each; a forfeited place
// keeps counting, a reclaimable one frees its slot. Run from
// TestRepositoryContract, on memory, SQLite and MySQL.
var repoLimitCases = []repoCase{
	{"limit_per_user_is_stored_and_read_back", func(t *testing.T, s repoSubject) {
		limited := repoAddLimited(t, s, 5, 3)
		plain := repoAdd(t, s, 1, 5)
		if got := repoGet(t, s, limited.ID()).Sale().LimitPerUser(); got != 3 {
			t.Fatalf("get: limit %d, want 3", got)
		}
		if got := repoGet(t, s, plain.ID()).Sale().LimitPerUser(); got != 1 {
			t.Fatalf("get of a sale without a limit: %d, want 1", got)
		}
		listed, err := s.vouchers.ListByShop(repoCtx(t), 1, listAll)
		if err != nil {
			t.Fatal(err)
		}
		live, err := s.vouchers.ListSeckillEndingAfter(repoCtx(t), testenv.Now())
		if err != nil {
			t.Fatal(err)
		}
		for what, vs := range map[string][]domain.Voucher{"list by shop": listed, "list live": live} {
			limits := map[domain.VoucherID]int{}
			for _, v := range vs {
				limits[v.ID()] = v.Sale().LimitPerUser()
			}
			if limits[limited.ID()] != 3 || limits[plain.ID()] != 1 {
				t.Fatalf("%s: limits %v, want %d: 3 and %d: 1", what, limits, limited.ID(), plain.ID())
			}
		}
	}},
	{"limit_two_a_users_third_order_is_a_duplicate", func(t *testing.T, s repoSubject) {
		v := repoAddLimited(t, s, 10, 2)
		first, second, third := testenv.Order(t, 1, 7, v.ID()), testenv.Order(t, 2, 7, v.ID()), testenv.Order(t, 3, 7, v.ID())
		other := testenv.Order(t, 4, 8, v.ID())
		// One batch each: the first is a plain first order, the second
		// finds the user's slot 1 taken, the third finds both taken.
		repoExpect(t, repoBatch(t, s, first), []domain.VoucherOrder{first}, "created")
		repoExpect(t, repoBatch(t, s, second, other), []domain.VoucherOrder{second, other}, "created", "created")
		repoExpect(t, repoBatch(t, s, third), []domain.VoucherOrder{third}, "duplicate")
		repoStock(t, s, v.ID(), 7)
		repoFound(t, s, third, domain.OrderFailed, domain.FailDuplicate)
		repoBuyers(t, s, v.ID(), first, second, other)
		if n, err := s.orders.CountBuyers(repoCtx(t), []domain.VoucherID{v.ID()}); err != nil || n[v.ID()] != 3 {
			t.Fatalf("count = %v, %v; want 3 places", n, err)
		}
		repoSlots(t, s, map[domain.OrderID]int{1: 1, 2: 2, 4: 1})

		// Redeliveries are answered by their records and take nothing.
		again := []domain.VoucherOrder{first, third, second}
		repoExpect(t, repoBatch(t, s, again...), again, "created again", "duplicate again", "created again")
		repoStock(t, s, v.ID(), 7)
	}},
	{"limit_three_in_one_batch", func(t *testing.T, s repoSubject) {
		v := repoAddLimited(t, s, 10, 3)
		var orders []domain.VoucherOrder
		for i := range 4 {
			orders = append(orders, testenv.Order(t, domain.OrderID(i+1), 7, v.ID()))
		}
		orders = append(orders, testenv.Order(t, 5, 8, v.ID()))
		repoExpect(t, repoBatch(t, s, orders...), orders, "created", "created", "created", "duplicate", "created")
		repoStock(t, s, v.ID(), 6)
		repoSlots(t, s, map[domain.OrderID]int{1: 1, 2: 2, 3: 3, 5: 1})
	}},
	{"limit_one_is_one_order_per_user", func(t *testing.T, s repoSubject) {
		v := repoAddLimited(t, s, 10, 1)
		first, second := testenv.Order(t, 1, 7, v.ID()), testenv.Order(t, 2, 7, v.ID())
		repoExpect(t, repoBatch(t, s, first), []domain.VoucherOrder{first}, "created")
		repoExpect(t, repoBatch(t, s, second), []domain.VoucherOrder{second}, "duplicate")
		repoStock(t, s, v.ID(), 9)
		repoSlots(t, s, map[domain.OrderID]int{1: 1})
	}},
	// Two writers at once, each with two orders of the same user: the
	// stock row's lock serialises them, so the user ends with exactly the
	// limit, whichever writer won. Several sales, so the writers meet on
	// each in either order.
	{"limit_two_concurrent_batches_of_one_user_create_two", func(t *testing.T, s repoSubject) {
		const rounds = 6
		for round := range rounds {
			v := repoAddLimited(t, s, 10, 2)
			base := domain.OrderID(100 * (round + 1))
			batches := [][]domain.VoucherOrder{
				{testenv.Order(t, base+1, 7, v.ID()), testenv.Order(t, base+2, 7, v.ID())},
				{testenv.Order(t, base+3, 7, v.ID()), testenv.Order(t, base+4, 7, v.ID())},
			}
			var (
				wg    sync.WaitGroup
				start = make(chan struct{})
				outs  = make([][]ports.Outcome, len(batches))
				errs  = make([]error, len(batches))
			)
			for i, b := range batches {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					outs[i], _, errs[i] = repoRetry(s, b)
				}()
			}
			close(start)
			wg.Wait()
			var created []domain.VoucherOrder
			for i := range batches {
				if errs[i] != nil {
					t.Fatalf("round %d, batch %d: %v", round, i, errs[i])
				}
				for _, o := range outs[i] {
					switch {
					case o.State == domain.OrderCreated && o.New:
						created = append(created, o.Order)
					case o.Reason != domain.FailDuplicate || !o.New:
						t.Fatalf("round %d: unexpected outcome %s of %s", round, repoShow(o), o.Order)
					}
				}
			}
			if len(created) != 2 {
				t.Fatalf("round %d: created %v, want 2 orders", round, created)
			}
			repoStock(t, s, v.ID(), 8)
			slices.SortFunc(created, func(a, b domain.VoucherOrder) int { return cmp.Compare(a.ID(), b.ID()) })
			repoBuyers(t, s, v.ID(), created...)
		}
	}},
	// A cancelled order forfeits its place (the default rule): it keeps
	// counting toward the limit, though its unit is back in the sale.
	{"limit_two_a_forfeited_place_keeps_counting", func(t *testing.T, s repoSubject) {
		r, ctx := lifeRule(t, s, false), repoCtx(t)
		v := repoAddLimited(t, s, 10, 2)
		first, second := lifeOrder(t, lifeT0, 1, 7, v.ID()), lifeOrder(t, lifeT0, 2, 7, v.ID())
		lifeCreate(t, r, first, second)
		if _, changed, err := r.Cancel(ctx, first.ID()); err != nil || !changed {
			t.Fatalf("cancel: %v, %v", changed, err)
		}
		repoStock(t, s, v.ID(), 9)
		third := lifeOrder(t, lifeT0, 3, 7, v.ID())
		out, err := r.CreateBatch(ctx, []domain.VoucherOrder{third})
		if err != nil || out[0].Reason != domain.FailDuplicate {
			t.Fatalf("a third order after a forfeit = %+v, %v; want a duplicate", out, err)
		}
		repoStock(t, s, v.ID(), 9)
		want := []domain.VoucherOrder{first.Forfeited(), second}
		if buyers, err := r.Buyers(ctx, v.ID()); err != nil || !slices.Equal(buyers, want) {
			t.Fatalf("buyers = %v, %v; want %v", buyers, err, want)
		}
		if n, err := r.CountBuyers(ctx, []domain.VoucherID{v.ID()}); err != nil || n[v.ID()] != 2 {
			t.Fatalf("count = %v, %v; want 2 places", n, err)
		}
	}},
	// Under SECKILL_RECLAIM_AFTER_CANCEL a cancelled order frees its place:
	// the user's next order takes its slot, the lowest free one.
	{"limit_three_a_reclaimed_slot_is_reused", func(t *testing.T, s repoSubject) {
		r, ctx := lifeRule(t, s, true), repoCtx(t)
		v := repoAddLimited(t, s, 10, 3)
		first, second := lifeOrder(t, lifeT0, 1, 7, v.ID()), lifeOrder(t, lifeT0, 2, 7, v.ID())
		lifeCreate(t, r, first, second)
		if _, changed, err := r.Cancel(ctx, first.ID()); err != nil || !changed {
			t.Fatalf("cancel: %v, %v", changed, err)
		}
		// Alone in its batch: slot 1 is free again, so the insert that
		// assumes a first place succeeds, and that is the right slot.
		third := lifeOrder(t, lifeT0, 3, 7, v.ID())
		lifeCreate(t, r, third)
		fourth, fifth := lifeOrder(t, lifeT0, 4, 7, v.ID()), lifeOrder(t, lifeT0, 5, 7, v.ID())
		out, err := r.CreateBatch(ctx, []domain.VoucherOrder{fourth, fifth})
		if err != nil || out[0].State != domain.OrderCreated || out[1].Reason != domain.FailDuplicate {
			t.Fatalf("claims up to the limit = %+v, %v; want the fourth created, the fifth a duplicate", out, err)
		}
		repoStock(t, s, v.ID(), 7)
		repoSlots(t, s, map[domain.OrderID]int{first.ID(): 1, second.ID(): 2, third.ID(): 1, fourth.ID(): 3})
		want := []domain.VoucherOrder{second, third, fourth}
		if buyers, err := r.Buyers(ctx, v.ID()); err != nil || !slices.Equal(buyers, want) {
			t.Fatalf("buyers = %v, %v; want %v", buyers, err, want)
		}
	}},
}

// repoAddLimited adds a sale of stock allowing limit orders per user.
func repoAddLimited(t *testing.T, s repoSubject, stock, limit int) domain.Voucher {
	t.Helper()
	begin := testenv.Now().In(repoZone)
	v := testenv.SeckillVoucher(t, domain.VoucherSpec{ShopID: 1, Title: "limited", PayValue: 8000, ActualValue: 10000},
		stock, begin, begin.Add(2*time.Hour))
	sale, err := v.Sale().WithLimitPerUser(limit)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := s.vouchers.AddSeckill(repoCtx(t), v.WithSale(sale))
	if err != nil {
		t.Fatalf("add seckill voucher: %v", err)
	}
	if got := saved.Sale().LimitPerUser(); got != limit {
		t.Fatalf("add seckill voucher: limit %d comes back as %d", limit, got)
	}
	return saved
}

// repoSlots checks the slots the SQL stores wrote (memory keeps them out of
// sight: its PlanBatch is the same).
func repoSlots(t *testing.T, s repoSubject, want map[domain.OrderID]int) {
	t.Helper()
	if s.db == nil {
		return
	}
	for id, slot := range want {
		var got int
		err := s.db.NewSelect().Table("tb_voucher_order").Column("slot").Where("id = ?", int64(id)).Scan(repoCtx(t), &got)
		if err != nil || got != slot {
			t.Fatalf("order %d: slot %d (%v), want %d", id, got, err, slot)
		}
	}
}
