package contract_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// A sale's limit per user (issue 40): a user may hold up to limitPerUser
// orders, one unit each, and never more, on every gate (memory, the Redis
// gate on miniredis, a real Redis and the cluster, and split vouchers on the
// same three): resent claims, sold-out answers, returns (forfeit and
// reclaim), releases, rebuilds and heals keep the count.

// limited is a voucher of the subject's kind that allows n orders per user.
func (s returnSubject) limited(t *testing.T, id domain.VoucherID, stock, n int) domain.Voucher {
	t.Helper()
	v := s.voucher(t, id, stock)
	sale, err := v.Sale().WithLimitPerUser(n)
	if err != nil {
		t.Fatal(err)
	}
	v = v.WithSale(sale)
	gatePreheat(t, s.gate, v)
	return v
}

func (s returnSubject) refused(t *testing.T, o domain.VoucherOrder, want error) {
	t.Helper()
	if err := s.reserve(gateCtx(t), o); !errors.Is(err, want) {
		t.Fatalf("claim %s: %v, want %v", o, err, want)
	}
}

// held asserts the gate's stock and the orders its places hold.
func (s returnSubject) held(t *testing.T, id domain.VoucherID, stock int, orders ...domain.VoucherOrder) {
	t.Helper()
	got, _, err := s.gate.Stock(gateCtx(t), id)
	if err != nil || got != stock {
		t.Fatalf("stock of %d: %d (%v), want %d", id, got, err, stock)
	}
	marks, err := s.gate.Buyers(gateCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	want := make(map[domain.OrderID]domain.UserID, len(orders))
	for _, o := range orders {
		want[o.ID()] = o.UserID()
	}
	if len(marks) != len(want) {
		t.Fatalf("voucher %d: places hold %v, want %v", id, marks, want)
	}
	for oid, u := range want {
		if marks[oid] != u {
			t.Fatalf("voucher %d: places hold %v, want %v", id, marks, want)
		}
	}
}

var limitCases = []struct {
	name    string
	reclaim bool
	run     func(t *testing.T, s returnSubject)
}{
	{name: "a_user_holds_up_to_the_limit_then_duplicate", run: func(t *testing.T, s returnSubject) {
		s.limited(t, 1, 10, 3)
		a, b, c := testenv.Order(t, 11, 7, 1), testenv.Order(t, 12, 7, 1), testenv.Order(t, 13, 7, 1)
		s.claim(t, a)
		s.claim(t, b)
		s.claim(t, c)
		s.refused(t, testenv.Order(t, 14, 7, 1), domain.ErrAlreadyClaimed)
		// Each claim resent after a lost reply is taken once, whichever
		// place it holds.
		s.claim(t, c)
		s.claim(t, a)
		other := testenv.Order(t, 15, 8, 1)
		s.claim(t, other)
		s.held(t, 1, 6, a, b, c, other)
		counts, err := s.probe.Counts(gateCtx(t), []domain.VoucherID{1})
		if err != nil || counts[1] != (ports.GateCount{Buyers: 4, Stock: 6}) {
			t.Fatalf("counts %v, %v; want 4 places and 6 units", counts, err)
		}
		for _, o := range []domain.VoucherOrder{a, b, c} {
			if got, ok, err := s.gate.Queued(gateCtx(t), 7, o.ID()); err != nil || !ok || got != o {
				t.Fatalf("queued %s: %v %v %v", o, got, ok, err)
			}
		}
	}},
	{name: "a_one_order_sale_is_unchanged", run: func(t *testing.T, s returnSubject) {
		s.limited(t, 1, 5, 1)
		s.claim(t, testenv.Order(t, 11, 7, 1))
		s.refused(t, testenv.Order(t, 12, 7, 1), domain.ErrAlreadyClaimed)
		s.held(t, 1, 4, testenv.Order(t, 11, 7, 1))
	}},
	{name: "the_sold_out_answer_still_takes_a_resent_claim", run: func(t *testing.T, s returnSubject) {
		s.limited(t, 1, 3, 3)
		a, b, c := testenv.Order(t, 11, 7, 1), testenv.Order(t, 12, 7, 1), testenv.Order(t, 13, 8, 1)
		s.claim(t, a)
		s.claim(t, b)
		s.claim(t, c)
		s.claim(t, b) // resent: its place holds it
		s.refused(t, testenv.Order(t, 14, 7, 1), domain.ErrSoldOut)
		s.held(t, 1, 0, a, b, c)
	}},
	{name: "a_claim_resent_after_the_sale_ended_is_taken_whichever_place_it_holds", run: func(t *testing.T, s returnSubject) {
		v := s.limited(t, 1, 10, 2)
		a, b := testenv.Order(t, 11, 7, 1), testenv.Order(t, 12, 7, 1)
		s.claim(t, a)
		s.claim(t, b)
		g, ok := s.gate.(ports.GateControls)
		if !ok {
			t.Fatalf("%T is not a GateControls", s.gate)
		}
		ended, err := v.Sale().EndNow(v.Sale().Begin().Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Apply(gateCtx(t), v.WithSale(ended)); err != nil {
			t.Fatal(err)
		}
		s.claim(t, b) // its second place holds it
		s.claim(t, a)
		s.refused(t, testenv.Order(t, 13, 8, 1), domain.ErrEnded)
		s.held(t, 1, 8, a, b)
	}},
	{name: "a_returned_order_keeps_its_place", run: func(t *testing.T, s returnSubject) {
		v := s.limited(t, 1, 10, 3)
		a, b, c := testenv.Order(t, 11, 7, 1), testenv.Order(t, 12, 7, 1), testenv.Order(t, 13, 7, 1)
		s.claim(t, a)
		s.claim(t, b)
		s.give(t, a)
		s.give(t, a) // a second return gives nothing more
		s.held(t, 1, 9, b)
		// The forfeited place survives a heal from the database's orders:
		// the heal finds it, and puts back nothing.
		if h, err := s.probe.Heal(gateCtx(t), v, []domain.VoucherOrder{a.Forfeited(), b}); err != nil || h != (ports.Healed{}) {
			t.Fatalf("heal of a whole gate: %+v, %v; want nothing", h, err)
		}
		s.claim(t, c) // the third place
		s.refused(t, testenv.Order(t, 14, 7, 1), domain.ErrAlreadyClaimed)
		s.held(t, 1, 8, b, c)
	}},
	{name: "with_reclaim_a_returned_order_frees_its_place", reclaim: true, run: func(t *testing.T, s returnSubject) {
		s.limited(t, 1, 10, 2)
		a, b, c := testenv.Order(t, 11, 7, 1), testenv.Order(t, 12, 7, 1), testenv.Order(t, 13, 7, 1)
		s.claim(t, a)
		s.claim(t, b)
		s.give(t, a)
		s.claim(t, c)
		s.refused(t, testenv.Order(t, 14, 7, 1), domain.ErrAlreadyClaimed)
		s.held(t, 1, 8, b, c)
	}},
	{name: "a_rebuilt_gate_keeps_every_place", run: func(t *testing.T, s returnSubject) {
		v := s.limited(t, 1, 10, 3)
		a, b, c := testenv.Order(t, 11, 7, 1), testenv.Order(t, 12, 7, 1), testenv.Order(t, 13, 7, 1)
		// The database holds two of user 7's orders and a forfeited third.
		if err := s.gate.Overwrite(gateCtx(t), v.WithStock(8), []domain.VoucherOrder{a, b, c.Forfeited()}); err != nil {
			t.Fatal(err)
		}
		s.refused(t, testenv.Order(t, 14, 7, 1), domain.ErrAlreadyClaimed)
		s.claim(t, b) // its place holds it: a resend after the rebuild
		s.held(t, 1, 8, a, b)
		// A rebuild from orders past the limit is refused, not half done.
		if err := s.gate.Overwrite(gateCtx(t), v, []domain.VoucherOrder{a, b, c, testenv.Order(t, 14, 7, 1)}); err == nil {
			t.Fatal("a rebuild with 4 orders of one user on a sale of 3 per user was accepted")
		}
	}},
	{name: "heal_puts_back_a_forgotten_second_order_once", run: func(t *testing.T, s returnSubject) {
		v := s.limited(t, 1, 10, 4)
		a, b, c := testenv.Order(t, 11, 7, 1), testenv.Order(t, 12, 7, 1), testenv.Order(t, 13, 7, 1)
		// The gate lost b and c's forfeit (a failover to a replica that lagged).
		if err := s.gate.Overwrite(gateCtx(t), v.WithStock(10), []domain.VoucherOrder{a}); err != nil {
			t.Fatal(err)
		}
		db := []domain.VoucherOrder{a, b, c.Forfeited()}
		h, err := s.probe.Heal(gateCtx(t), v, db)
		if err != nil || h != (ports.Healed{Restored: 2, Retaken: 1}) {
			t.Fatalf("heal: %+v, %v; want b's place and unit back, and c's forfeited place", h, err)
		}
		if h, err := s.probe.Heal(gateCtx(t), v, db); err != nil || h != (ports.Healed{}) {
			t.Fatalf("second heal: %+v, %v; want nothing", h, err)
		}
		s.held(t, 1, 9, a, b)
		s.claim(t, testenv.Order(t, 14, 7, 1)) // the fourth place
		s.refused(t, testenv.Order(t, 15, 7, 1), domain.ErrAlreadyClaimed)
	}},
	{name: "a_claim_resent_after_a_release_takes_no_second_unit", run: func(t *testing.T, s returnSubject) {
		// The user's first claim is released (its enqueue failed) while the
		// second's reply is lost; the second is resent. It must find its own
		// order, not the first place free, and take nothing more.
		s.limited(t, 1, 10, 3)
		a, b := testenv.Order(t, 11, 7, 1), testenv.Order(t, 12, 7, 1)
		s.claim(t, a)
		s.claim(t, b)
		if err := s.gate.Release(gateCtx(t), a, true); err != nil {
			t.Fatal(err)
		}
		s.claim(t, b)
		s.held(t, 1, 9, b)
		c, d := testenv.Order(t, 13, 7, 1), testenv.Order(t, 14, 7, 1)
		s.claim(t, c)
		s.claim(t, d)
		s.refused(t, testenv.Order(t, 15, 7, 1), domain.ErrAlreadyClaimed)
		s.held(t, 1, 7, b, c, d)
	}},
	{name: "with_reclaim_a_claim_resent_after_a_return_takes_no_second_unit", reclaim: true, run: func(t *testing.T, s returnSubject) {
		s.limited(t, 1, 10, 2)
		a, b := testenv.Order(t, 11, 7, 1), testenv.Order(t, 12, 7, 1)
		s.claim(t, a)
		s.claim(t, b)
		s.give(t, a)
		s.claim(t, b)
		s.held(t, 1, 9, b)
	}},
	{name: "controls_keep_the_limit", run: func(t *testing.T, s returnSubject) {
		v := s.limited(t, 1, 10, 2)
		controls, ok := s.gate.(ports.GateControls)
		if !ok {
			t.Skip("the gate takes no controls")
		}
		now := testenv.WallClock{}.Now()
		sale := v.Sale()
		for _, change := range []func(domain.Sale) (domain.Sale, error){
			func(x domain.Sale) (domain.Sale, error) { return x.WithPause(true, now) },
			func(x domain.Sale) (domain.Sale, error) { return x.WithPause(false, now) },
			func(x domain.Sale) (domain.Sale, error) { return x.AddStock(5, now) },
		} {
			var err error
			if sale, err = change(sale); err != nil {
				t.Fatal(err)
			}
			if err := controls.Apply(gateCtx(t), v.WithSale(sale)); err != nil {
				t.Fatal(err)
			}
		}
		a, b := testenv.Order(t, 11, 7, 1), testenv.Order(t, 12, 7, 1)
		s.claim(t, a)
		s.claim(t, b)
		s.refused(t, testenv.Order(t, 13, 7, 1), domain.ErrAlreadyClaimed)
		s.held(t, 1, 13, a, b)
	}},
	{name: "concurrent_claims_of_one_user_take_the_limit", run: func(t *testing.T, s returnSubject) {
		s.limited(t, 1, 30, 3)
		const n = 24
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { errs[i] = s.reserve(gateCtx(t), testenv.Order(t, domain.OrderID(100+i), 7, 1)) })
		}
		wg.Wait()
		ok := 0
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, domain.ErrAlreadyClaimed):
				t.Fatalf("claim %d: %v", i, err)
			}
		}
		marks, err := s.gate.Buyers(gateCtx(t), 1)
		if err != nil || ok != 3 || len(marks) != 3 {
			t.Fatalf("%d claims taken, %d places held (%v); want 3 and 3", ok, len(marks), err)
		}
		if got, _, _ := s.gate.Stock(gateCtx(t), 1); got != 27 {
			t.Fatalf("stock %d, want 27", got)
		}
	}},
}

func TestGateLimitPerUserContract(t *testing.T) {
	for _, b := range returnBackends() {
		t.Run(b.name, func(t *testing.T) {
			newSubject := b.open(t)
			for _, tc := range limitCases {
				t.Run(tc.name, func(t *testing.T) {
					tc.run(t, newSubject(t, tc.reclaim))
				})
			}
		})
	}
}
