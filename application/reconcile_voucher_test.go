package application_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
)

type fixedBacklog int64

func (b fixedBacklog) Pending(context.Context, domain.VoucherID) (int64, error) { return int64(b), nil }

func TestReconcileVoucher(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// crash runs the scenario and returns the gate to reconcile.
		crash         func(t *testing.T, w *world, vid domain.VoucherID) *memory.Gate
		wantNotInDB   int
		wantNotInGate int
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
				return memory.NewGate(fixedClock{now})
			},
			wantNotInGate: 2,
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
			if r.Consistent() || len(r.NotInDB) != tt.wantNotInDB || len(r.NotInGate) != tt.wantNotInGate ||
				r.DBOrders != 2 || r.DBStock != 8 || r.Pending != -1 {
				t.Fatalf("report %+v", r)
			}
			fixed, err := rec.Fix(ctx, vid)
			if err != nil || !fixed.Consistent() {
				t.Fatalf("after fix: %+v, %v", fixed, err)
			}
			// The gate now sells exactly what the database has left, to users
			// without an order; buyers in the database stay buyers.
			claim := application.NewClaimSeckill(memory.NewIDs(fixedClock{now}), chanqueue.NewAdmission(gate, chanqueue.New(100, 0)))
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
