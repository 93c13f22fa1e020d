package contract_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The OrderLifecycle contract, on every OrderRepository (memory, SQLite,
// MySQL): run from TestRepositoryContract.

const lifeWindow = 15 * time.Minute

var lifeT0 = testenv.Now()

// lifeRepo is the subject's store with a pay window.
type lifeRepo interface {
	ports.OrderRepository
	ports.OrderLifecycle
	ports.OrderLedger
}

// lifePay pays o with transaction tx: the order after, and whether the
// transaction was new.
func lifePay(r lifeRepo, ctx context.Context, o domain.VoucherOrder, tx string, at time.Time) (domain.OrderStatus, bool, error) {
	res, err := r.Pay(ctx, domain.Payment{TransactionID: tx, Order: o, Amount: 1, At: at})
	return res.Status, res.New, err
}

func lifeOf(t *testing.T, s repoSubject) lifeRepo {
	t.Helper()
	return lifeRule(t, s, false)
}

// lifeRule is lifeOf with the rule for a cancelled order's buyer: reclaim
// frees the place (SECKILL_RECLAIM_AFTER_CANCEL), else it is forfeited.
func lifeRule(t *testing.T, s repoSubject, reclaim bool) lifeRepo {
	t.Helper()
	if s.db != nil {
		return mysqlstore.NewOrderRepo(s.db).WithPayWindow(lifeWindow).WithReclaimAfterCancel(reclaim)
	}
	return memory.NewOrders(s.vouchers.(*memory.Vouchers)).WithPayWindow(lifeWindow).WithReclaimAfterCancel(reclaim)
}

// lifeOrder is an order claimed at at.
func lifeOrder(t *testing.T, at time.Time, seq uint32, user domain.UserID, v domain.VoucherID) domain.VoucherOrder {
	t.Helper()
	id, err := domain.NewOrderID(at, seq)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Order(t, id, user, v)
}

func lifeCreate(t *testing.T, r lifeRepo, orders ...domain.VoucherOrder) {
	t.Helper()
	out, err := r.CreateBatch(repoCtx(t), orders)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out {
		if o.State != domain.OrderCreated {
			t.Fatalf("create %s: %+v", o.Order, o)
		}
	}
}

func lifeFind(t *testing.T, r lifeRepo, id domain.OrderID) domain.OrderStatus {
	t.Helper()
	st, err := r.Find(repoCtx(t), id)
	if err != nil {
		t.Fatalf("find %d: %v", id, err)
	}
	return st
}

var repoLifecycleCases = []repoCase{
	// A message delivered again after its order was paid or cancelled is
	// the order created before, as for one still unpaid: the worker counts
	// it replayed and leaves the buyer's mark in the gate.
	{"lifecycle_redelivery_after_pay_or_cancel_is_created_again", func(t *testing.T, s repoSubject) {
		r, ctx := lifeOf(t, s), repoCtx(t)
		v := repoAdd(t, s, 1, 5)
		orders := []domain.VoucherOrder{lifeOrder(t, lifeT0, 1, 1, v.ID()), lifeOrder(t, lifeT0, 2, 2, v.ID()), lifeOrder(t, lifeT0, 3, 3, v.ID())}
		lifeCreate(t, r, orders...)
		if _, _, err := lifePay(r, ctx, orders[1], "tx-2", lifeT0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.Cancel(ctx, orders[2].ID()); err != nil {
			t.Fatal(err)
		}
		out, err := r.CreateBatch(ctx, orders)
		if err != nil {
			t.Fatal(err)
		}
		repoExpect(t, out, orders, "created again", "created again", "created again")
		if out, err = r.MarkFailed(ctx, orders, domain.FailUndeliverable); err != nil {
			t.Fatal(err)
		}
		repoExpect(t, out, orders, "created again", "created again", "created again")
	}},
	{"lifecycle_expire_due_returns_units_once", func(t *testing.T, s repoSubject) {
		r, ctx := lifeOf(t, s), repoCtx(t)
		v := repoAdd(t, s, 1, 5)
		due := lifeOrder(t, lifeT0, 1, 1, v.ID())
		later := lifeOrder(t, lifeT0.Add(10*time.Minute), 2, 2, v.ID())
		paid := lifeOrder(t, lifeT0, 3, 3, v.ID())
		lifeCreate(t, r, due, later, paid)
		if st := lifeFind(t, r, due.ID()); st.State != domain.OrderCreated || !st.PayDeadline.Equal(lifeT0.Add(lifeWindow)) {
			t.Fatalf("new order = %+v, want created, due at %s", st, lifeT0.Add(lifeWindow))
		}
		if _, _, err := lifePay(r, ctx, paid, "tx-3", lifeT0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		got, err := r.ExpireDue(ctx, lifeT0.Add(lifeWindow-time.Microsecond), 10)
		if err != nil || len(got) != 0 {
			t.Fatalf("before the deadline: %v, %v", got, err)
		}
		got, err = r.ExpireDue(ctx, lifeT0.Add(lifeWindow), 10)
		if err != nil || len(got) != 1 || got[0].Order != due || !got[0].Deadline.Equal(lifeT0.Add(lifeWindow)) {
			t.Fatalf("at the deadline: %v, %v; want [%s]", got, err, due)
		}
		if st := lifeFind(t, r, due.ID()); st.State != domain.OrderCancelled || st.CancelReason != domain.CancelExpired {
			t.Fatalf("expired order = %+v", st)
		}
		repoStock(t, s, v.ID(), 3)
		if got, err := r.ExpireDue(ctx, lifeT0.Add(time.Hour), 10); err != nil || len(got) != 1 || got[0].Order != later {
			t.Fatalf("an hour later: %v, %v; want only [%s] (paid never expires)", got, err, later)
		}
		repoStock(t, s, v.ID(), 4)
		un, err := r.Unreturned(ctx, 10)
		if err != nil || len(un) != 2 || un[0] != due || un[1] != later {
			t.Fatalf("unreturned = %v, %v", un, err)
		}
		if err := r.Returned(ctx, []domain.OrderID{due.ID(), later.ID(), paid.ID()}); err != nil {
			t.Fatal(err)
		}
		if un, err := r.Unreturned(ctx, 10); err != nil || len(un) != 0 {
			t.Fatalf("unreturned after Returned = %v, %v", un, err)
		}
		if st := lifeFind(t, r, paid.ID()); st.State != domain.OrderPaid || !st.PaidAt.Equal(lifeT0.Add(time.Minute)) {
			t.Fatalf("paid order = %+v", st)
		}
		if _, _, err := lifePay(r, ctx, later, "tx-2", lifeT0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		// stock left + unpaid + paid = the initial stock; the cancelled and
		// the refunding gave theirs back, and its late payment is owed back.
		want := ports.SaleTally{Stock: 4, Paid: 1, Cancelled: 1, Refunding: 1, RefundsOwed: 1, RefundsOwedFen: 1}
		if got, err := r.Tally(ctx, v.ID()); err != nil || got != want {
			t.Fatalf("tally = %+v, %v; want %+v", got, err, want)
		}
	}},
	// The default rule: a cancelled (or expired) order forfeits its buyer's
	// place. Its unit returns to the sale, but the buyer's next order is a
	// duplicate, in the database as in the gate.
	{"lifecycle_cancelled_order_forfeits_the_place", func(t *testing.T, s repoSubject) {
		r, ctx := lifeOf(t, s), repoCtx(t)
		v := repoAdd(t, s, 1, 2)
		first := lifeOrder(t, lifeT0, 1, 7, v.ID())
		lifeCreate(t, r, first)
		if _, changed, err := r.Cancel(ctx, first.ID()); err != nil || !changed {
			t.Fatalf("cancel: %v, %v", changed, err)
		}
		repoStock(t, s, v.ID(), 2)
		again := lifeOrder(t, lifeT0, 2, 7, v.ID())
		other := lifeOrder(t, lifeT0, 3, 8, v.ID())
		out, err := r.CreateBatch(ctx, []domain.VoucherOrder{again, other})
		if err != nil || out[0].Reason != domain.FailDuplicate || out[1].State != domain.OrderCreated {
			t.Fatalf("claims after the cancel = %+v, %v; want the buyer's a duplicate, another buyer's created", out, err)
		}
		repoStock(t, s, v.ID(), 1)
		// The forfeited place still counts (the gate keeps its mark), and a
		// gate rebuilt from the buyers keeps it; only the holding order
		// holds a unit.
		if n, err := r.CountBuyers(ctx, []domain.VoucherID{v.ID()}); err != nil || n[v.ID()] != 2 {
			t.Fatalf("count = %v, %v; want 2 places", n, err)
		}
		want := []domain.VoucherOrder{first.Forfeited(), other}
		if buyers, err := r.Buyers(ctx, v.ID()); err != nil || !slices.Equal(buyers, want) {
			t.Fatalf("buyers = %v, %v; want the forfeited place, then the holding order", buyers, err)
		}
		if page, err := r.BuyersAfter(ctx, v.ID(), first.ID(), 10); err != nil || !slices.Equal(page, want[1:]) {
			t.Fatalf("page after the first = %v, %v; want the holding order", page, err)
		}
	}},
	{"lifecycle_cancelled_buyer_claims_again", func(t *testing.T, s repoSubject) {
		r, ctx := lifeRule(t, s, true), repoCtx(t)
		v := repoAdd(t, s, 1, 2)
		first := lifeOrder(t, lifeT0, 1, 7, v.ID())
		lifeCreate(t, r, first)
		if st, changed, err := r.Cancel(ctx, first.ID()); err != nil || !changed || st.State != domain.OrderCancelled || st.CancelReason != domain.CancelByBuyer {
			t.Fatalf("cancel = %+v, %v, %v", st, changed, err)
		}
		repoStock(t, s, v.ID(), 2)
		second := lifeOrder(t, lifeT0, 2, 7, v.ID())
		third := lifeOrder(t, lifeT0, 3, 7, v.ID())
		out, err := r.CreateBatch(ctx, []domain.VoucherOrder{second, third})
		if err != nil || out[0].State != domain.OrderCreated || out[1].Reason != domain.FailDuplicate {
			t.Fatalf("claims again = %+v, %v; want the second created, the third a duplicate", out, err)
		}
		repoStock(t, s, v.ID(), 1)
		buyers, err := r.Buyers(ctx, v.ID())
		if err != nil || len(buyers) != 1 || buyers[0] != second {
			t.Fatalf("buyers = %v, %v; want only the holding order", buyers, err)
		}
		if n, err := r.CountBuyers(ctx, []domain.VoucherID{v.ID()}); err != nil || n[v.ID()] != 1 {
			t.Fatalf("count = %v, %v", n, err)
		}
		if page, err := r.BuyersAfter(ctx, v.ID(), 0, 10); err != nil || len(page) != 1 {
			t.Fatalf("page = %v, %v", page, err)
		}
		if st := lifeFind(t, r, first.ID()); st.State != domain.OrderCancelled {
			t.Fatalf("the cancelled order stays on record: %+v", st)
		}
	}},
	{"lifecycle_transitions", func(t *testing.T, s repoSubject) {
		r, ctx := lifeOf(t, s), repoCtx(t)
		v := repoAdd(t, s, 1, 1)
		o := lifeOrder(t, lifeT0, 1, 1, v.ID())
		sold := lifeOrder(t, lifeT0, 2, 2, v.ID()) // out of stock: failed
		lifeCreate(t, r, o)
		if out, err := r.CreateBatch(ctx, []domain.VoucherOrder{sold}); err != nil || out[0].State != domain.OrderFailed {
			t.Fatalf("out of stock = %+v, %v", out, err)
		}
		steps := []struct {
			name        string
			do          func() (domain.OrderStatus, bool, error)
			wantState   domain.OrderState
			wantChanged bool
			wantErr     error
		}{
			{"pay", func() (domain.OrderStatus, bool, error) { return lifePay(r, ctx, o, "tx", lifeT0) }, domain.OrderPaid, true, nil},
			{"pay_again", func() (domain.OrderStatus, bool, error) { return lifePay(r, ctx, o, "tx", lifeT0) }, domain.OrderPaid, false, nil},
			{"pay_again_with_another_transaction", func() (domain.OrderStatus, bool, error) { return lifePay(r, ctx, o, "tx-2", lifeT0) }, domain.OrderPaid, true, nil},
			{"cancel_paid", func() (domain.OrderStatus, bool, error) { return r.Cancel(ctx, o.ID()) }, domain.OrderPaid, false, domain.ErrAlreadyPaid},
			{"pay_failed_with_a_transaction_of_another_order", func() (domain.OrderStatus, bool, error) { return lifePay(r, ctx, sold, "tx", lifeT0) }, "", false, domain.ErrTransactionReused},
			{"pay_failed", func() (domain.OrderStatus, bool, error) { return lifePay(r, ctx, sold, "tx-f", lifeT0) }, domain.OrderFailed, true, nil},
			{"pay_failed_again", func() (domain.OrderStatus, bool, error) { return lifePay(r, ctx, sold, "tx-f", lifeT0) }, domain.OrderFailed, false, nil},
			{"cancel_failed", func() (domain.OrderStatus, bool, error) { return r.Cancel(ctx, sold.ID()) }, domain.OrderFailed, false, nil},
			{"pay_unknown", func() (domain.OrderStatus, bool, error) {
				return lifePay(r, ctx, lifeOrder(t, lifeT0, 99, 9, v.ID()), "tx-u", lifeT0)
			}, "", false, domain.ErrOrderNotFound},
			{"cancel_unknown", func() (domain.OrderStatus, bool, error) { return r.Cancel(ctx, o.ID()+99) }, "", false, domain.ErrOrderNotFound},
		}
		for _, st := range steps {
			got, changed, err := st.do()
			if got.State != st.wantState || changed != st.wantChanged || !errors.Is(err, st.wantErr) {
				t.Fatalf("%s: (%s, %v, %v), want (%s, %v, %v)", st.name, got.State, changed, err, st.wantState, st.wantChanged, st.wantErr)
			}
		}
		repoStock(t, s, v.ID(), 0)
		if got, err := r.ExpireDue(ctx, lifeT0.Add(time.Hour), 10); err != nil || len(got) != 0 {
			t.Fatalf("a paid order expired: %v, %v", got, err)
		}
		// Every payment is on record once: the double charge and the
		// failed order's are owed back.
		tally, err := r.Tally(ctx, v.ID())
		if err != nil || tally.RefundsOwed != 2 || tally.RefundsOwedFen != 2 || tally.DoubleCharges != 1 || tally.Paid != 1 {
			t.Fatalf("tally %+v (%v), want 2 payments owed back, 1 of them a double charge, 1 order paid", tally, err)
		}
	}},
	{"lifecycle_two_expirers_return_each_unit_once", func(t *testing.T, s repoSubject) {
		r, ctx := lifeOf(t, s), repoCtx(t)
		const n = 60
		v := repoAdd(t, s, 1, n)
		orders := make([]domain.VoucherOrder, n)
		for i := range orders {
			orders[i] = lifeOrder(t, lifeT0, uint32(i+1), domain.UserID(i+1), v.ID())
		}
		lifeCreate(t, r, orders...)
		repoStock(t, s, v.ID(), 0)
		seen := map[domain.OrderID]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 2 {
			wg.Go(func() {
				<-start
				for {
					got, err := r.ExpireDue(ctx, lifeT0.Add(lifeWindow), 7)
					if err != nil {
						t.Errorf("expire: %v", err) // a deadlock would be a bug here: rows are skipped, not waited on
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, o := range got {
						seen[o.Order.ID()]++
					}
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if len(seen) != n {
			t.Fatalf("expired %d distinct orders, want %d", len(seen), n)
		}
		for id, k := range seen {
			if k != 1 {
				t.Fatalf("order %d expired %d times", id, k)
			}
		}
		repoStock(t, s, v.ID(), n)
	}},
	{"lifecycle_payment_races_expiry", func(t *testing.T, s repoSubject) {
		r, ctx := lifeOf(t, s), repoCtx(t)
		const rounds = 100
		v := repoAdd(t, s, 1, rounds)
		expired := 0
		for i := range rounds {
			o := lifeOrder(t, lifeT0, uint32(i+1), domain.UserID(i+1), v.ID())
			lifeCreate(t, r, o)
			var got []ports.ExpiredOrder
			var payErr, expErr error
			start := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() { <-start; got, expErr = r.ExpireDue(ctx, lifeT0.Add(lifeWindow), 10) })
			wg.Go(func() { <-start; _, _, payErr = lifePay(r, ctx, o, fmt.Sprintf("tx-%d", i), lifeT0) })
			close(start)
			wg.Wait()
			if payErr != nil || expErr != nil {
				t.Fatalf("round %d: pay %v, expire %v", i, payErr, expErr)
			}
			st := lifeFind(t, r, o.ID())
			switch {
			case len(got) == 0 && st.State == domain.OrderPaid:
			case len(got) == 1 && st.State == domain.OrderRefunding && st.CancelReason == domain.CancelExpired:
				expired++
			default:
				t.Fatalf("round %d: expired %v, order %+v", i, got, st)
			}
		}
		repoStock(t, s, v.ID(), expired)
		t.Logf("%d of %d rounds expired first", expired, rounds)
	}},
}
