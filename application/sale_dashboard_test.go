package application_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// brokenGate fails the audit read, as a Redis outage would.
type brokenGate struct{ ports.GateAudit }

func (brokenGate) Stock(context.Context, domain.VoucherID) (int, bool, error) {
	return 0, false, errors.New("redis down")
}

func TestSaleDashboard(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 16, nil)
	gate := w.gate.(*memory.Gate)
	counter := metrics.NewClaimCounter()
	rooms := application.NewRoomDirectory(memory.NewRooms(gate), testenv.NewClock(now))
	board := application.NewSaleDashboard(w.vouchers, gate, w.orders, w.queue, counter, rooms, testenv.NewClock(now))

	later := w.voucher(t, 5, now.Add(2*time.Hour), now.Add(3*time.Hour))
	soon := w.voucher(t, 5, now.Add(time.Hour), now.Add(3*time.Hour))
	live := w.live(t, 2)
	w.voucher(t, 5, now.Add(-2*time.Hour), now.Add(-time.Minute)) // ended: not shown

	claim := application.NewClaimSeckill(memory.NewIDs(testenv.NewClock(now)), chanqueue.NewAdmission(w.gate, w.queue)).WithRecorder(counter)
	for u := domain.UserID(1); u <= 3; u++ {
		_, _ = claim.Handle(ctx, u, live)
	}
	w.drain(t)

	b, err := board.Handle(ctx, application.SaleBoardQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []domain.VoucherID
	for _, s := range b.Sales {
		ids = append(ids, s.Voucher.ID())
	}
	if b.Total != 3 || len(ids) != 3 || ids[0] != live || ids[1] != soon || ids[2] != later {
		t.Fatalf("board lists %v of %d; want live %d, then %d and %d by start", ids, b.Total, live, soon, later)
	}
	s := b.Sales[0]
	if s.State != application.SaleSoldOut || b.Sales[1].State != application.SaleUpcoming || !s.GateFound || s.GateStock != 0 ||
		s.DB != (ports.SaleTally{Stock: 0, Unpaid: 2}) || s.Claims["success"] != 2 || s.Claims["sold_out"] != 1 {
		t.Fatalf("live sale row: %+v", s)
	}
	if b.Queue.Kind != "channel" || b.Queue.Length != 0 || s.Backlog.Known {
		t.Fatalf("queue: %+v, backlog %+v", b.Queue, s.Backlog)
	}

	// A backend that fails fails the reading: zeros would read as a sell-out.
	broken := application.NewSaleDashboard(w.vouchers, brokenGate{gate}, w.orders, w.queue, counter, rooms, testenv.NewClock(now))
	if _, err := broken.Handle(ctx, application.SaleBoardQuery{}); err == nil {
		t.Fatal("a failing gate gave a board")
	}
}
