package application_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

type fixedBacklog int64

func (b fixedBacklog) Pending(context.Context, domain.VoucherID) (int64, error) { return int64(b), nil }
func (b fixedBacklog) Orders(context.Context, domain.VoucherID, int) ([]domain.VoucherOrder, bool, error) {
	return nil, b == 0, nil
}

// streamBacklog stands in for a durable queue: the orders it holds are the
// ones taken out of the world's channel and not yet fulfilled.
type streamBacklog struct {
	held    []domain.VoucherOrder
	partial bool   // holds more than it shows
	onRead  func() // runs before Orders answers: the worker moving on meanwhile
}

func (b *streamBacklog) Pending(context.Context, domain.VoucherID) (int64, error) {
	return int64(len(b.held)), nil
}

func (b *streamBacklog) Orders(_ context.Context, _ domain.VoucherID, max int) ([]domain.VoucherOrder, bool, error) {
	if b.onRead != nil {
		b.onRead()
	}
	n := min(max, len(b.held))
	return b.held[:n], !b.partial && n == len(b.held), nil
}

// take moves what the world's channel holds into the backlog, as if it were
// a stream the worker has not finished.
func (b *streamBacklog) take(t *testing.T, w *world) {
	t.Helper()
	for w.queue.Len() > 0 {
		ds, err := w.queue.Receive(context.Background(), 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			b.held = append(b.held, d.Order)
		}
	}
}

// fulfil writes what the backlog holds, as the worker would, and acks it.
func (b *streamBacklog) fulfil(t *testing.T, w *world) {
	t.Helper()
	if _, err := w.fulfill.Handle(context.Background(), b.held); err != nil {
		t.Fatal(err)
	}
	b.held = nil
}

func TestReconcileVoucher(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// crash runs the scenario and returns the gate to reconcile.
		crash         func(t *testing.T, w *world, vid domain.VoucherID) *memory.Gate
		wantNotInDB   int
		wantNotInGate int
		wantForgotten int
	}{
		{
			name: "channel_crash_lost_queued_orders",
			crash: func(t *testing.T, w *world, vid domain.VoucherID) *memory.Gate {
				for u := domain.UserID(1); u <= 2; u++ {
					if _, err := w.claim.Handle(ctx, u, vid); err != nil {
						t.Fatal(err)
					}
				}
				w.drain(t)
				for u := domain.UserID(3); u <= 5; u++ {
					if _, err := w.claim.Handle(ctx, u, vid); err != nil {
						t.Fatal(err)
					}
				}
				w.queue = chanqueue.New(10, 0) // the process died with 3 orders in its channel
				return w.gate.(*memory.Gate)
			},
			wantNotInDB: 3,
		},
		{
			name: "redis_lost_its_data",
			crash: func(t *testing.T, w *world, vid domain.VoucherID) *memory.Gate {
				for u := domain.UserID(1); u <= 2; u++ {
					if _, err := w.claim.Handle(ctx, u, vid); err != nil {
						t.Fatal(err)
					}
				}
				w.drain(t)
				return memory.NewGate(testenv.NewClock(now))
			},
			wantNotInGate: 2,
			wantForgotten: 2,
		},
		{
			name: "redis_forgot_a_committed_order_and_its_buyer_claimed_again",
			crash: func(t *testing.T, w *world, vid domain.VoucherID) *memory.Gate {
				var first domain.OrderID
				for u := domain.UserID(1); u <= 2; u++ {
					id, err := w.claim.Handle(ctx, u, vid)
					if err != nil {
						t.Fatal(err)
					}
					if u == 1 {
						first = id
					}
				}
				w.drain(t)
				gate := w.gate.(*memory.Gate)
				gate.Lose(testenv.Order(t, first, 1, vid)) // a failover to a replica that lagged
				// User 2's order is forgotten too; user 1 claims again (told
				// success twice) and the database refuses it as a duplicate.
				b, _ := gate.Buyers(ctx, vid)
				for oid, u := range b {
					if u == 2 {
						gate.Lose(testenv.Order(t, oid, 2, vid))
					}
				}
				if _, err := w.claim.Handle(ctx, 1, vid); err != nil {
					t.Fatal(err)
				}
				w.drain(t)
				return gate
			},
			wantNotInDB:   1, // the duplicate's mark: refused by the database, kept by the gate
			wantNotInGate: 2,
			wantForgotten: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, 10, nil)
			vid := w.live(t, 10)
			gate := tt.crash(t, w, vid)
			rec := application.NewReconcileVoucher(w.vouchers, w.orders, gate, nil)

			r, err := rec.Check(ctx, vid)
			if err != nil {
				t.Fatal(err)
			}
			if r.Consistent() || len(r.NotInDB) != tt.wantNotInDB || len(r.NotInGate) != tt.wantNotInGate || r.Forgotten != tt.wantForgotten ||
				r.DBOrders != 2 || r.DBStock != 8 || r.Pending != -1 {
				t.Fatalf("report %+v", r)
			}
			fixed, err := rec.Fix(ctx, vid)
			if err != nil || !fixed.Consistent() {
				t.Fatalf("after fix: %+v, %v", fixed, err)
			}
			// The gate now sells exactly what the database has left, to users
			// without an order; buyers in the database stay buyers.
			claim := application.NewClaimSeckill(w.ids.Sharing(testenv.NewClock(now)), chanqueue.NewAdmission(gate, chanqueue.New(100, 0)))
			if _, err := claim.Handle(ctx, 1, vid); !errors.Is(err, domain.ErrAlreadyClaimed) {
				t.Fatalf("a buyer in the database: %v", err)
			}
			sold := 0
			for u := domain.UserID(3); u <= 20; u++ {
				if _, err := claim.Handle(ctx, u, vid); err == nil {
					sold++
				}
			}
			if sold != 8 {
				t.Fatalf("sold %d after the fix, want the database's 8", sold)
			}
		})
	}
}

func TestReconcileVoucherRefusesToFixWhileTheQueueHoldsOrders(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 10, nil)
	vid := w.live(t, 10)
	if _, err := w.claim.Handle(ctx, 1, vid); err != nil {
		t.Fatal(err)
	}
	gate := w.gate.(*memory.Gate)
	rec := application.NewReconcileVoucher(w.vouchers, w.orders, gate, fixedBacklog(1))
	if _, err := rec.Fix(ctx, vid); !errors.Is(err, application.ErrBacklog) {
		t.Fatalf("fix = %v, want ErrBacklog", err)
	}
	if stock, _, _ := gate.Stock(ctx, vid); stock != 9 {
		t.Fatalf("a refused fix changed the gate: stock %d", stock)
	}
	if _, err := rec.Check(ctx, 999); !errors.Is(err, domain.ErrVoucherNotFound) {
		t.Fatalf("unknown voucher: %v", err)
	}
}

// TestReconcileVoucherTellsInFlightFromLost: right after claims, orders still
// in a durable queue are in flight, not differences; only what neither the
// database nor the queue holds is lost.
func TestReconcileVoucherTellsInFlightFromLost(t *testing.T) {
	ctx := context.Background()
	// sold: users 1-2 fulfilled, users 3-5 claimed and taken into the backlog.
	sold := func(t *testing.T) (*world, domain.VoucherID, *streamBacklog) {
		w := newWorld(t, 10, nil)
		vid := w.live(t, 10)
		for u := domain.UserID(1); u <= 5; u++ {
			if _, err := w.claim.Handle(ctx, u, vid); err != nil {
				t.Fatal(err)
			}
			if u == 2 {
				w.drain(t)
			}
		}
		b := &streamBacklog{}
		b.take(t, w)
		return w, vid, b
	}
	check := func(t *testing.T, w *world, vid domain.VoucherID, b *streamBacklog) application.Report {
		t.Helper()
		r, err := application.NewReconcileVoucher(w.vouchers, w.orders, w.gate.(*memory.Gate), b).Check(ctx, vid)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	t.Run("only_in_flight", func(t *testing.T) {
		w, vid, b := sold(t)
		r := check(t, w, vid, b)
		if len(r.InFlight) != 3 || len(r.NotInDB) != 0 || len(r.NotInGate) != 0 || r.Pending != 3 || r.QueuePartial ||
			!r.OnlyInFlight() || r.Consistent() || r.GateStock != 5 || r.DBStock != 8 {
			t.Fatalf("report %+v; want 3 in flight and nothing else", r)
		}
		rec := application.NewReconcileVoucher(w.vouchers, w.orders, w.gate.(*memory.Gate), b)
		if _, err := rec.Fix(ctx, vid); !errors.Is(err, application.ErrBacklog) {
			t.Fatalf("fix while orders are in flight = %v, want ErrBacklog", err)
		}
		b.fulfil(t, w)
		if r := check(t, w, vid, b); !r.Consistent() || r.OnlyInFlight() || len(r.InFlight) != 0 || r.DBOrders != 5 {
			t.Fatalf("after the queue drained: %+v; want consistent", r)
		}
	})

	t.Run("one_lost_beside_the_in_flight", func(t *testing.T) {
		w, vid, b := sold(t)
		lost := b.held[0]
		b.held = b.held[1:] // its entry is gone and the database never got it
		r := check(t, w, vid, b)
		if len(r.InFlight) != 2 || len(r.NotInDB) != 1 || r.NotInDB[0] != lost || r.OnlyInFlight() || r.Consistent() {
			t.Fatalf("report %+v; want 2 in flight and %v lost", r, lost)
		}
	})

	t.Run("queued_order_id_of_another_user_is_not_the_marks", func(t *testing.T) {
		w, vid, b := sold(t)
		o := b.held[0]
		forged, err := domain.NewVoucherOrder(o.ID(), o.UserID()+100, vid)
		if err != nil {
			t.Fatal(err)
		}
		b.held[0] = forged
		r := check(t, w, vid, b)
		if len(r.InFlight) != 2 || len(r.NotInDB) != 1 || r.NotInDB[0] != o || r.OnlyInFlight() {
			t.Fatalf("report %+v; want %v not in flight", r, o)
		}
	})

	t.Run("a_queue_too_long_to_read_leaves_the_rest_unknown", func(t *testing.T) {
		w, vid, b := sold(t)
		b.held, b.partial = b.held[:1], true
		r := check(t, w, vid, b)
		if !r.QueuePartial || len(r.InFlight) != 1 || len(r.NotInDB) != 2 || r.OnlyInFlight() {
			t.Fatalf("report %+v; want 1 in flight, 2 unknown, partial", r)
		}
	})

	t.Run("orders_written_while_it_checks_are_not_lost", func(t *testing.T) {
		// The worker commits and acks the backlog after the gate was read and
		// before the queue is: the database, read last, has them.
		w, vid, b := sold(t)
		b.onRead = func() { b.onRead = nil; b.fulfil(t, w) }
		if r := check(t, w, vid, b); !r.Consistent() {
			t.Fatalf("report %+v; want consistent", r)
		}
	})
}

// TestReconcileCountsEachPlaceOfALimitedSale: on a sale of 2 per user,
// reconcile compares orders, not users: a gate that forgot a user's second
// order reports it forgotten (its user has a free place), one whose places
// hold other orders reports it but not as forgotten, and Fix puts every
// place back.
func TestReconcileCountsEachPlaceOfALimitedSale(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 10, nil)
	sale, err := domain.NewSale(10, now.Add(-time.Hour), now.Add(time.Hour))
	if err == nil {
		sale, err = sale.WithLimitPerUser(2)
	}
	if err != nil {
		t.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "t", PayValue: 1, ActualValue: 2}, sale)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := w.add.Handle(ctx, testAdmin, v)
	if err != nil {
		t.Fatal(err)
	}
	vid := saved.ID()
	var ids []domain.OrderID
	for _, u := range []domain.UserID{1, 1, 2} {
		id, err := w.claim.Handle(ctx, u, vid)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	w.drain(t)
	gate := w.gate.(*memory.Gate)
	rec := application.NewReconcileVoucher(w.vouchers, w.orders, gate, nil)
	if r, err := rec.Check(ctx, vid); err != nil || !r.Consistent() || r.DBOrders != 3 || r.GateBuyers != 3 {
		t.Fatalf("before any loss: %+v, %v; want consistent, 3 orders in both", r, err)
	}
	gate.Lose(testenv.Order(t, ids[1], 1, vid)) // user 1's second order
	r, err := rec.Check(ctx, vid)
	if err != nil || r.Consistent() || len(r.NotInGate) != 1 || r.NotInGate[0].ID() != ids[1] || r.Forgotten != 1 || len(r.NotInDB) != 0 {
		t.Fatalf("after losing user 1's second order: %+v, %v", r, err)
	}
	fixed, err := rec.Fix(ctx, vid)
	if err != nil || !fixed.Consistent() || fixed.GateBuyers != 3 {
		t.Fatalf("after fix: %+v, %v", fixed, err)
	}
	if _, err := w.claim.Handle(ctx, 1, vid); !errors.Is(err, domain.ErrAlreadyClaimed) {
		t.Fatalf("user 1's third claim after the fix: %v, want duplicate", err)
	}
}
