package contract_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The order lifecycle's side of the gate (issue 25): StockGate.Return gives
// a cancelled order's unit back by order id, and the heal honours it. One
// suite, every gate: memory, the Redis gate on miniredis, a real Redis and
// the cluster, and split vouchers on the same three.

// returnSubject is a fresh gate and the kind of voucher it sells.
type returnSubject struct {
	gate    gateUnderTest
	probe   ports.GateProbe
	reserve func(ctx context.Context, o domain.VoucherOrder) error
	voucher func(t *testing.T, id domain.VoucherID, stock int) domain.Voucher
}

type returnBackend struct {
	name string
	// open returns the subject maker; reclaim makes a gate whose Return
	// frees the buyer's place (SECKILL_RECLAIM_AFTER_CANCEL).
	open func(t *testing.T) func(t *testing.T, reclaim bool) returnSubject
}

func returnBackends() []returnBackend {
	backends := []returnBackend{
		{name: "memory", open: func(*testing.T) func(*testing.T, bool) returnSubject {
			return func(_ *testing.T, reclaim bool) returnSubject {
				g := memory.NewGate(testenv.WallClock{}).WithReclaimAfterCancel(reclaim)
				return returnSubject{gate: g, probe: g, reserve: g.Reserve, voucher: gateOpenVoucher}
			}
		}},
	}
	for _, b := range testenv.Redises() {
		backends = append(backends, returnBackend{name: b.Name, open: func(t *testing.T) func(*testing.T, bool) returnSubject {
			rdb := b.Client(t)
			return func(t *testing.T, reclaim bool) returnSubject {
				prefix := testenv.KeyPrefix(t)
				testenv.DropPrefix(t, rdb, prefix)
				g := redisgate.New(rdb, redisgate.Options{Prefix: prefix, ReclaimAfterCancel: reclaim})
				return returnSubject{gate: g, probe: g, reserve: g.Reserve, voucher: gateOpenVoucher}
			}
		}}, returnBackend{name: b.Name + "_split", open: func(t *testing.T) func(*testing.T, bool) returnSubject {
			rdb := b.Client(t)
			return func(t *testing.T, reclaim bool) returnSubject {
				prefix := testenv.KeyPrefix(t)
				testenv.DropPrefix(t, rdb, prefix)
				g := redisgate.New(rdb, redisgate.Options{Prefix: prefix, ReclaimAfterCancel: reclaim})
				return returnSubject{gate: g, probe: g, reserve: g.ReserveAndAppend, voucher: func(t *testing.T, id domain.VoucherID, stock int) domain.Voucher {
					begin, end := gateOpen()
					sale, err := domain.NewSale(stock, begin, end)
					if err == nil {
						sale, err = sale.WithBuckets(3)
					}
					if err != nil {
						t.Fatal(err)
					}
					v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "split gate test"}, sale)
					if err != nil {
						t.Fatal(err)
					}
					return v.WithID(id)
				}}
			}
		}})
	}
	return backends
}

func (s returnSubject) claim(t *testing.T, o domain.VoucherOrder) {
	t.Helper()
	if err := s.reserve(gateCtx(t), o); err != nil {
		t.Fatalf("claim %s: %v", o, err)
	}
}

func (s returnSubject) give(t *testing.T, orders ...domain.VoucherOrder) {
	t.Helper()
	if err := s.gate.Return(gateCtx(t), orders); err != nil {
		t.Fatalf("return %d orders: %v", len(orders), err)
	}
}

// books asserts the gate's stock and buyers, and the invariant that every
// unit is either left or held: stock + holders = the initial stock.
func (s returnSubject) books(t *testing.T, id domain.VoucherID, initial, stock int, buyers map[domain.UserID]domain.OrderID) {
	t.Helper()
	gateState(t, s.gate, id, stock, buyers)
	if stock+len(buyers) != initial {
		t.Fatalf("voucher %d: stock %d + holders %d != initial %d", id, stock, len(buyers), initial)
	}
}

var returnCases = []struct {
	name    string
	reclaim bool // a gate whose Return frees the buyer's place
	run     func(t *testing.T, s returnSubject)
}{
	// The default: a cancelled or expired order forfeits its buyer's place.
	// The unit goes back to the sale, the buyer's next claim is a duplicate
	// (the hoarding loop of claim, lapse, claim again is closed), and a
	// repeated return gives nothing more.
	{name: "a_returned_order_forfeits_its_buyers_place", run: func(t *testing.T, s returnSubject) {
		v := s.voucher(t, 1, 6)
		gatePreheat(t, s.gate, v)
		o1 := testenv.Order(t, 11, 1, 1)
		s.claim(t, o1)
		s.books(t, 1, 6, 5, map[domain.UserID]domain.OrderID{1: 11})
		s.give(t, o1)
		s.give(t, o1, o1) // idempotent: the forfeit mark no longer names o1
		if err := s.reserve(gateCtx(t), testenv.Order(t, 19, 1, 1)); !errors.Is(err, domain.ErrAlreadyClaimed) {
			t.Fatalf("the buyer of a returned order claims again: %v; want duplicate", err)
		}
		// The unit came back once: the buyer's mark holds none.
		s.books(t, 1, 6, 6, map[domain.UserID]domain.OrderID{})
		s.claim(t, testenv.Order(t, 21, 2, 1))
		s.books(t, 1, 6, 5, map[domain.UserID]domain.OrderID{2: 21})
	}},
	// A gate rebuilt from the database (a Redis restarted empty, reconcile
	// --fix) keeps a forfeited place: the orders' repository lists it
	// Forfeited, and the gate marks it without a unit, so the buyer's next
	// claim is still a duplicate and a late return gives nothing.
	{name: "a_rebuilt_gate_keeps_a_forfeited_place", run: func(t *testing.T, s returnSubject) {
		v := s.voucher(t, 1, 4) // what the database has left: 6 sold down to 4 by o1 and o2, o1 returned
		o1, o2 := testenv.Order(t, 11, 1, 1), testenv.Order(t, 12, 2, 1)
		if err := s.gate.Overwrite(gateCtx(t), v, []domain.VoucherOrder{o1.Forfeited(), o2}); err != nil {
			t.Fatal(err)
		}
		s.books(t, 1, 5, 4, map[domain.UserID]domain.OrderID{2: 12})
		if err := s.reserve(gateCtx(t), testenv.Order(t, 19, 1, 1)); !errors.Is(err, domain.ErrAlreadyClaimed) {
			t.Fatalf("the buyer of a forfeited order claims on a rebuilt gate: %v; want duplicate", err)
		}
		s.give(t, o1) // a return retried after the rebuild
		s.books(t, 1, 5, 4, map[domain.UserID]domain.OrderID{2: 12})
	}},
	// The heal puts a forfeited place back too (a failover that lost the
	// claim and its return), and takes no unit for it.
	{name: "heal_puts_back_a_forfeited_place_without_a_unit", run: func(t *testing.T, s returnSubject) {
		v := s.voucher(t, 1, 5)
		gatePreheat(t, s.gate, v)
		got, err := s.probe.Heal(gateCtx(t), v, []domain.VoucherOrder{testenv.Order(t, 11, 1, 1).Forfeited()})
		if want := (ports.Healed{Restored: 1}); err != nil || got != want {
			t.Fatalf("heal: %+v, %v; want %+v (a mark, no unit)", got, err, want)
		}
		s.books(t, 1, 5, 5, map[domain.UserID]domain.OrderID{})
		if err := s.reserve(gateCtx(t), testenv.Order(t, 19, 1, 1)); !errors.Is(err, domain.ErrAlreadyClaimed) {
			t.Fatalf("the buyer of a forfeited order claims after the heal: %v; want duplicate", err)
		}
	}},
	{name: "return_gives_a_unit_back_exactly_once", run: func(t *testing.T, s returnSubject) {
		v := s.voucher(t, 1, 6)
		gatePreheat(t, s.gate, v)
		o1, o2 := testenv.Order(t, 11, 1, 1), testenv.Order(t, 12, 2, 1)
		s.claim(t, o1)
		s.claim(t, o2)
		s.books(t, 1, 6, 4, map[domain.UserID]domain.OrderID{1: 11, 2: 12})
		s.give(t, o1)
		s.books(t, 1, 6, 5, map[domain.UserID]domain.OrderID{2: 12})
		s.give(t, o1) // idempotent
		s.give(t, o1, o1)
		s.books(t, 1, 6, 5, map[domain.UserID]domain.OrderID{2: 12})
	}},
	{name: "the_buyer_claims_again_and_a_late_return_leaves_the_new_order", reclaim: true, run: func(t *testing.T, s returnSubject) {
		v := s.voucher(t, 1, 6)
		gatePreheat(t, s.gate, v)
		o1 := testenv.Order(t, 11, 1, 1)
		s.claim(t, o1)
		s.give(t, o1)
		again := testenv.Order(t, 19, 1, 1)
		s.claim(t, again)
		s.books(t, 1, 6, 5, map[domain.UserID]domain.OrderID{1: 19})
		s.give(t, o1) // a pass that crashed before recording its return, finished later
		s.books(t, 1, 6, 5, map[domain.UserID]domain.OrderID{1: 19})
		s.give(t, again)
		s.books(t, 1, 6, 6, map[domain.UserID]domain.OrderID{})
	}},
	{name: "one_return_of_orders_of_several_vouchers", reclaim: true, run: func(t *testing.T, s returnSubject) {
		gatePreheat(t, s.gate, s.voucher(t, 1, 6))
		gatePreheat(t, s.gate, s.voucher(t, 2, 3))
		var orders []domain.VoucherOrder
		for u := domain.UserID(1); u <= 3; u++ {
			o1, o2 := testenv.Order(t, domain.OrderID(100+u), u, 1), testenv.Order(t, domain.OrderID(200+u), u, 2)
			s.claim(t, o1)
			s.claim(t, o2)
			orders = append(orders, o1, o2)
		}
		s.books(t, 2, 3, 0, map[domain.UserID]domain.OrderID{1: 201, 2: 202, 3: 203})
		s.give(t, orders[1:5]...) // users 1 and 2 of voucher 2, 2 and 3 of voucher 1
		s.books(t, 1, 6, 5, map[domain.UserID]domain.OrderID{1: 101})
		s.books(t, 2, 3, 2, map[domain.UserID]domain.OrderID{3: 203})
		s.claim(t, testenv.Order(t, 301, 2, 2)) // the returned units are sellable
		s.books(t, 2, 3, 1, map[domain.UserID]domain.OrderID{2: 301, 3: 203})
	}},
	{name: "return_to_a_gate_that_is_gone_writes_nothing", run: func(t *testing.T, s returnSubject) {
		s.give(t, testenv.Order(t, 11, 1, 1))
		if _, ok, err := s.gate.Stock(gateCtx(t), 1); err != nil || ok {
			t.Fatalf("return created a gate (present %v, err %v)", ok, err)
		}
	}},
	// The heal/expiry race: the repair read o1 among the database's buyers,
	// then o1 expired and its unit came back, then the heal runs with the
	// page it read. It must put back only what the gate truly lost (o2), not
	// o1: that would hold o1's unit for good (its return already recorded)
	// and refuse its buyer's next claim as a duplicate.
	{name: "heal_never_puts_back_a_returned_order", reclaim: true, run: func(t *testing.T, s returnSubject) {
		v := s.voucher(t, 1, 5)
		gatePreheat(t, s.gate, v)
		o1, o2 := testenv.Order(t, 11, 1, 1), testenv.Order(t, 12, 2, 1)
		s.claim(t, o1)
		s.claim(t, o2)
		gateRelease(t, s.gate, o2, true) // lost, as a lagging replica loses it
		page := []domain.VoucherOrder{o1, o2}
		s.give(t, o1) // the expiry, between the repair's read and its heal
		got, err := s.probe.Heal(gateCtx(t), v, page)
		if want := (ports.Healed{Restored: 1, Retaken: 1}); err != nil || got != want {
			t.Fatalf("heal: %+v, %v; want %+v (o2 only)", got, err, want)
		}
		s.books(t, 1, 5, 4, map[domain.UserID]domain.OrderID{2: 12})
		s.claim(t, testenv.Order(t, 19, 1, 1)) // o1's buyer claims again
		s.books(t, 1, 5, 3, map[domain.UserID]domain.OrderID{1: 19, 2: 12})
	}},
	{name: "heal_honours_a_return_that_found_the_mark_already_lost", run: func(t *testing.T, s returnSubject) {
		v := s.voucher(t, 1, 5)
		gatePreheat(t, s.gate, v)
		o1 := testenv.Order(t, 11, 1, 1)
		s.claim(t, o1)
		gateRelease(t, s.gate, o1, true) // lost: the gate holds no mark and the unit
		s.give(t, o1)                    // then the order expired: nothing to give back, but remembered
		got, err := s.probe.Heal(gateCtx(t), v, []domain.VoucherOrder{o1})
		if err != nil || got != (ports.Healed{}) {
			t.Fatalf("heal: %+v, %v; want nothing", got, err)
		}
		s.books(t, 1, 5, 5, map[domain.UserID]domain.OrderID{})
	}},
}

func TestGateReturnContract(t *testing.T) {
	for _, b := range returnBackends() {
		t.Run(b.name, func(t *testing.T) {
			newSubject := b.open(t)
			for _, tc := range returnCases {
				t.Run(tc.name, func(t *testing.T) {
					s := newSubject(t, tc.reclaim)
					tc.run(t, s)
				})
			}
		})
	}
}
