package application_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// healWorld is a world whose gate can lose writes, and the claims made on it.
type healWorld struct {
	*world
	gate   *memory.Gate
	vid    domain.VoucherID
	orders map[domain.UserID]domain.VoucherOrder // every success answered, by user
	repair *application.RestoreGate
}

func newHealWorld(t *testing.T, stock int) *healWorld {
	w := newWorld(t, 5000, nil)
	g := w.gate.(*memory.Gate)
	return &healWorld{world: w, gate: g, vid: w.live(t, stock), orders: map[domain.UserID]domain.VoucherOrder{},
		repair: application.NewRestoreGate(w.vouchers, w.orders, g, g, testenv.NewClock(now))}
}

// claim claims for users from..to and wants every claim answered success.
func (h *healWorld) claim(t *testing.T, from, to domain.UserID) {
	t.Helper()
	for u := from; u <= to; u++ {
		id, err := h.world.claim.Handle(context.Background(), u, h.vid)
		if err != nil {
			t.Fatalf("claim of user %d: %v", u, err)
		}
		o, err := domain.NewVoucherOrder(id, u, h.vid)
		if err != nil {
			t.Fatal(err)
		}
		h.orders[u] = o
	}
}

// lose makes the gate forget the claims of users from..to, as a Redis that
// restarted from an older snapshot or failed over to a lagging replica does.
func (h *healWorld) lose(from, to domain.UserID) {
	for u := from; u <= to; u++ {
		h.gate.Lose(h.orders[u])
	}
}

func (h *healWorld) dbStock(t *testing.T) int {
	t.Helper()
	v, err := h.vouchers.Get(context.Background(), h.vid)
	if err != nil {
		t.Fatal(err)
	}
	return v.Sale().Stock()
}

// A gate that exists but forgot committed orders is healed from the
// database: each forgotten buyer is marked again (claiming again is a
// duplicate, no second success), its unit is taken off the gate's stock
// while there is stock, and once the queue drains the books are equal (gate
// stock = database stock, every order's user marked). Without the heal the
// forgotten buyers' second claims succeed and their units are sold again.
func TestRepairHealsAGateBehindTheDatabase(t *testing.T) {
	tests := []struct {
		name  string
		stock int
		// committed: users 1..committed claim and their orders are written;
		// lost: users 1..lost are then forgotten by the gate; resold: users
		// 10001..10000+resold claim afterwards, still in flight at the repair.
		committed, lost, resold domain.UserID
		want                    ports.Healed
	}{
		{"forgotten_buyers_of_a_sale_with_stock_left", 5, 3, 2, 0, ports.Healed{Restored: 2, Retaken: 2}},
		{"every_buyer_forgotten", 4, 4, 4, 0, ports.Healed{Restored: 4, Retaken: 4}},
		{"forgotten_units_partly_sold_again", 4, 4, 3, 1, ports.Healed{Restored: 3, Retaken: 2, Oversold: 1}},
		{"more_forgotten_than_one_page", 1500, 1200, 1100, 0, ports.Healed{Restored: 1100, Retaken: 1100}},
		{"nothing_forgotten_with_claims_in_flight", 5, 2, 0, 2, ports.Healed{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			h := newHealWorld(t, tt.stock)
			h.claim(t, 1, tt.committed)
			h.drain(t)
			h.lose(1, tt.lost)
			h.claim(t, 10001, 10000+tt.resold)

			rep, err := h.repair.Repair(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got ports.Healed
			for _, hv := range rep.Healed {
				if hv.Voucher != h.vid {
					t.Fatalf("healed voucher %d, want %d", hv.Voucher, h.vid)
				}
				got = got.Add(hv.Healed)
			}
			if rep.Restored != 0 || got != tt.want {
				t.Fatalf("repair = %+v (healed %+v), want healed %+v and nothing restored whole", rep, got, tt.want)
			}
			for u := domain.UserID(1); u <= tt.lost; u++ {
				// Sold out comes before duplicate (as the original): either
				// way, no second success.
				_, err := h.world.claim.Handle(ctx, u, h.vid)
				if !errors.Is(err, domain.ErrAlreadyClaimed) && !errors.Is(err, domain.ErrSoldOut) {
					t.Fatalf("forgotten buyer %d claimed again: %v, want duplicate or sold out", u, err)
				}
			}
			res := h.drain(t)
			for _, f := range res.Failed {
				if f.Reason != domain.FailOutOfStock {
					t.Fatalf("a resale failed with %s, want out_of_stock", f.Reason)
				}
			}
			if len(res.Failed) != int(tt.want.Oversold) {
				t.Fatalf("%d resales refused, want the %d units the heal counted oversold", len(res.Failed), tt.want.Oversold)
			}
			requireBooksEqual(t, h)
			if rep, err := h.repair.Repair(ctx); err != nil || len(rep.Healed) != 0 {
				t.Fatalf("second repair: %+v, %v; want nothing more", rep, err)
			}
		})
	}
}

// requireBooksEqual: gate stock = database stock, and the gate marks exactly
// the database's buyers (with the queue drained nothing else is in flight).
func requireBooksEqual(t *testing.T, h *healWorld) {
	t.Helper()
	ctx := context.Background()
	stock, _, _ := h.gate.Stock(ctx, h.vid)
	if db := h.dbStock(t); stock != db {
		t.Fatalf("gate stock %d, database stock %d", stock, db)
	}
	buyers, err := h.world.orders.Buyers(ctx, h.vid)
	if err != nil {
		t.Fatal(err)
	}
	marks, _ := h.gate.Buyers(ctx, h.vid)
	if len(marks) != len(buyers) {
		t.Fatalf("gate marks %d buyers, database holds %d orders", len(marks), len(buyers))
	}
	for _, o := range buyers {
		if marks[o.ID()] != o.UserID() {
			t.Fatalf("user %d holds order %d, gate marks it for user %d", o.UserID(), o.ID(), marks[o.ID()])
		}
	}
}

// A forgotten buyer who claims again before the repair gets a second success
// (the loss cannot be undone), the database refuses it as a duplicate, and
// the gate keeps that claim's mark and unit: the unit stands for the order
// the user holds, so the heal must not take a second one.
func TestRepairDoesNotRetakeTheUnitOfABuyerWhoClaimedAgain(t *testing.T) {
	ctx := context.Background()
	h := newHealWorld(t, 3)
	h.claim(t, 1, 2)
	h.drain(t)
	h.lose(1, 1)
	again, err := h.world.claim.Handle(ctx, 1, h.vid)
	if err != nil {
		t.Fatalf("the forgotten buyer's second claim: %v (the loss should let it through)", err)
	}
	res := h.drain(t)
	if len(res.Failed) != 1 || res.Failed[0].Reason != domain.FailDuplicate || res.Failed[0].Order.ID() != again {
		t.Fatalf("drain = %+v, want the second claim failed as duplicate", res)
	}
	rep, err := h.repair.Repair(ctx)
	if err != nil || len(rep.Healed) != 0 {
		t.Fatalf("repair = %+v, %v; want nothing healed", rep, err)
	}
	stock, _, _ := h.gate.Stock(ctx, h.vid)
	if db := h.dbStock(t); stock != db || db != 1 {
		t.Fatalf("gate stock %d, database stock %d; want both 1", stock, db)
	}
}

// An instance that starts on a gate behind the database heals it before it
// serves claims.
func TestRepairHealsAtStart(t *testing.T) {
	ctx := context.Background()
	h := newHealWorld(t, 5)
	h.claim(t, 1, 3)
	h.drain(t)
	h.lose(2, 3)
	rep, err := h.repair.Repair(ctx)
	want := ports.Healed{Restored: 2, Retaken: 2}
	if err != nil || rep.Restored != 0 || len(rep.Healed) != 1 || rep.Healed[0].Healed != want {
		t.Fatalf("repair = %+v, %v; want voucher %d healed %+v", rep, err, h.vid, want)
	}
	requireBooksEqual(t, h)
}

// buyerReads counts the vouchers whose buyers were read from the database.
type buyerReads struct {
	ports.OrderRepository
	read []domain.VoucherID
}

func (b *buyerReads) Buyers(ctx context.Context, id domain.VoucherID) ([]domain.VoucherOrder, error) {
	b.read = append(b.read, id)
	return b.OrderRepository.Buyers(ctx, id)
}

// A repair reads the buyers of the gates it rebuilds only: a start on a
// Redis that kept its data reads none (at a large sale, millions of rows),
// and a gate lost alone is rebuilt with its buyers.
func TestRepairReadsTheBuyersOfLostGatesOnly(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 10, nil)
	g := w.gate.(*memory.Gate)
	kept, lost := w.live(t, 3), w.live(t, 3)
	for _, v := range []domain.VoucherID{kept, lost} {
		if _, err := w.claim.Handle(ctx, 1, v); err != nil {
			t.Fatal(err)
		}
	}
	w.drain(t)
	reads := &buyerReads{OrderRepository: w.orders}
	repair := application.NewRestoreGate(w.vouchers, reads, g, g, testenv.NewClock(now))

	if rep, err := repair.Repair(ctx); err != nil || rep.Restored != 0 || len(reads.read) != 0 {
		t.Fatalf("repair of a whole gate = %+v, %v, read the buyers of %v; want nothing read", rep, err, reads.read)
	}
	g.Forget(lost)
	if rep, err := repair.Repair(ctx); err != nil || rep.Restored != 1 || len(reads.read) != 1 || reads.read[0] != lost {
		t.Fatalf("repair of a lost voucher = %+v, %v, read the buyers of %v; want voucher %d's only", rep, err, reads.read, lost)
	}
	if _, err := w.claim.Handle(ctx, 1, lost); !errors.Is(err, domain.ErrAlreadyClaimed) {
		t.Fatalf("the buyer of the rebuilt voucher claims again: %v, want already claimed", err)
	}
}
