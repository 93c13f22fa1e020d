package contract_test

import (
	"testing"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// probeUnderTest is a gate the GateProbe suite can claim on and look into.
type probeUnderTest interface {
	gateUnderTest
	ports.GateProbe
}

type probeBackend struct {
	name string
	open func(t *testing.T) func(t *testing.T) probeUnderTest
}

func probeBackends() []probeBackend {
	backends := []probeBackend{
		{name: "memory", open: func(*testing.T) func(*testing.T) probeUnderTest {
			return func(*testing.T) probeUnderTest { return memory.NewGate(testenv.WallClock{}) }
		}},
	}
	for _, b := range testenv.Redises() { // miniredis, then real Redis and the cluster when named
		backends = append(backends, probeBackend{name: b.Name, open: func(t *testing.T) func(*testing.T) probeUnderTest {
			rdb := b.Client(t)
			return func(t *testing.T) probeUnderTest {
				prefix := testenv.KeyPrefix(t)
				testenv.DropPrefix(t, rdb, prefix)
				return redisgate.New(rdb, redisgate.Options{Prefix: prefix})
			}
		}})
	}
	return backends
}

func probeHeal(t *testing.T, g probeUnderTest, v domain.Voucher, want ports.Healed, orders ...domain.VoucherOrder) {
	t.Helper()
	got, err := g.Heal(gateCtx(t), v, orders)
	if err != nil || got != want {
		t.Fatalf("heal voucher %d with %d orders: %+v, %v; want %+v", v.ID(), len(orders), got, err, want)
	}
}

func probeCounts(t *testing.T, g probeUnderTest, want map[domain.VoucherID]ports.GateCount, ids ...domain.VoucherID) {
	t.Helper()
	got, err := g.Counts(gateCtx(t), ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	for id, c := range want {
		if got[id] != c {
			t.Fatalf("counts of voucher %d: %+v, want %+v", id, got[id], c)
		}
	}
}

// A claim released with its unit returned leaves the gate exactly as a
// Redis that lost the claim's write does (no mark, the unit back), so the
// cases make lost writes that way, on every backend alike.
var probeCases = []struct {
	name string
	run  func(t *testing.T, g probeUnderTest)
}{
	{"counts_report_marks_and_stock_of_held_vouchers_only", func(t *testing.T, g probeUnderTest) {
		gatePreheat(t, g, gateOpenVoucher(t, 1, 5))
		gatePreheat(t, g, gateOpenVoucher(t, 2, 3))
		s := gateSubject{gate: g, reserve: g.Reserve}
		gateReserve(t, s, testenv.Order(t, 11, 7, 1), nil)
		gateReserve(t, s, testenv.Order(t, 12, 8, 1), nil)
		probeCounts(t, g, map[domain.VoucherID]ports.GateCount{1: {Buyers: 2, Stock: 3}, 2: {Buyers: 0, Stock: 3}}, 1, 2, 404)
	}},
	{"heal_puts_back_forgotten_buyers_and_retakes_their_units", func(t *testing.T, g probeUnderTest) {
		v := gateOpenVoucher(t, 1, 5)
		gatePreheat(t, g, v)
		s := gateSubject{gate: g, reserve: g.Reserve}
		o1, o2, o3 := testenv.Order(t, 11, 1, 1), testenv.Order(t, 12, 2, 1), testenv.Order(t, 13, 3, 1)
		gateReserve(t, s, o1, nil)
		gateReserve(t, s, o2, nil)
		gateRelease(t, g, o1, true) // lost
		// The database holds o1, o2 and o3 (whose claim the gate lost
		// before anyone read it).
		probeHeal(t, g, v, ports.Healed{Restored: 2, Retaken: 2}, o1, o2, o3)
		gateState(t, g, 1, 2, map[domain.UserID]domain.OrderID{1: 11, 2: 12, 3: 13})
		gateReserve(t, s, testenv.Order(t, 14, 1, 1), domain.ErrAlreadyClaimed)
		// Idempotent: a second run changes nothing.
		probeHeal(t, g, v, ports.Healed{}, o1, o2, o3)
		gateState(t, g, 1, 2, map[domain.UserID]domain.OrderID{1: 11, 2: 12, 3: 13})
	}},
	{"heal_counts_units_already_sold_again_as_oversold", func(t *testing.T, g probeUnderTest) {
		v := gateOpenVoucher(t, 1, 1)
		gatePreheat(t, g, v)
		s := gateSubject{gate: g, reserve: g.Reserve}
		o1 := testenv.Order(t, 11, 1, 1)
		gateReserve(t, s, o1, nil)
		gateRelease(t, g, o1, true)                        // lost
		gateReserve(t, s, testenv.Order(t, 12, 2, 1), nil) // the unit sold again
		probeHeal(t, g, v, ports.Healed{Restored: 1, Oversold: 1}, o1)
		gateState(t, g, 1, 0, map[domain.UserID]domain.OrderID{1: 11, 2: 12})
	}},
	{"heal_keeps_every_mark_the_gate_holds", func(t *testing.T, g probeUnderTest) {
		v := gateOpenVoucher(t, 1, 5)
		gatePreheat(t, g, v)
		s := gateSubject{gate: g, reserve: g.Reserve}
		o1 := testenv.Order(t, 11, 1, 1)
		gateReserve(t, s, o1, nil)
		gateRelease(t, g, o1, true)                        // lost
		gateReserve(t, s, testenv.Order(t, 19, 1, 1), nil) // user 1 again: the database refuses it as a duplicate
		gateReserve(t, s, testenv.Order(t, 12, 2, 1), nil) // in flight, not in the database yet
		probeHeal(t, g, v, ports.Healed{}, o1)
		gateState(t, g, 1, 3, map[domain.UserID]domain.OrderID{1: 19, 2: 12})
	}},
	{"heal_of_a_gate_that_is_gone_writes_nothing", func(t *testing.T, g probeUnderTest) {
		v := gateOpenVoucher(t, 1, 5)
		probeHeal(t, g, v, ports.Healed{}, testenv.Order(t, 11, 1, 1))
		if _, ok, err := g.Stock(gateCtx(t), 1); err != nil || ok {
			t.Fatalf("heal created a gate (present %v, err %v)", ok, err)
		}
		if b, err := g.Buyers(gateCtx(t), 1); err != nil || len(b) != 0 {
			t.Fatalf("heal wrote buyers %v (%v) without a gate", b, err)
		}
	}},
	{"heal_of_many_buyers_in_one_call", func(t *testing.T, g probeUnderTest) {
		v := gateOpenVoucher(t, 1, 2000)
		gatePreheat(t, g, v)
		orders := make([]domain.VoucherOrder, 1234)
		want := make(map[domain.UserID]domain.OrderID, len(orders))
		for i := range orders {
			orders[i] = testenv.Order(t, domain.OrderID(10000+i), domain.UserID(i+1), 1)
			want[domain.UserID(i+1)] = domain.OrderID(10000 + i)
		}
		probeHeal(t, g, v, ports.Healed{Restored: 1234, Retaken: 1234}, orders...)
		gateState(t, g, 1, 2000-1234, want)
		probeCounts(t, g, map[domain.VoucherID]ports.GateCount{1: {Buyers: 1234, Stock: 2000 - 1234}}, 1)
	}},
	{"heal_refuses_orders_of_another_voucher", func(t *testing.T, g probeUnderTest) {
		v := gateOpenVoucher(t, 1, 5)
		gatePreheat(t, g, v)
		if _, err := g.Heal(gateCtx(t), v, []domain.VoucherOrder{testenv.Order(t, 11, 1, 2)}); err == nil {
			t.Fatal("heal took an order of voucher 2 for voucher 1")
		}
		gateState(t, g, 1, 5, nil)
	}},
}

// TestGateProbeContract: Counts and Heal behave alike on the memory gate, on
// miniredis, and on real Redis and the cluster when they are named.
func TestGateProbeContract(t *testing.T) {
	for _, b := range probeBackends() {
		t.Run(b.name, func(t *testing.T) {
			newGate := b.open(t)
			for _, tc := range probeCases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, newGate(t)) })
			}
		})
	}
}
