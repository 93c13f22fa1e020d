package application_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// failingControls fails the gate's next n writes, as a Redis that timed out.
type failingControls struct {
	ports.GateControls
	fail int
}

func (f *failingControls) SetEnd(ctx context.Context, v domain.Voucher) error {
	if f.fail > 0 {
		f.fail--
		return errors.New("redis: i/o timeout")
	}
	return f.GateControls.SetEnd(ctx, v)
}

// TestEndSaleRetriedAfterTheGateFailed: the database commits the end with
// its audit entry before the gate is written; when the gate's write fails
// the control answers an error, claims still pass, and the admin's retry
// writes the gate from the stored sale without a second audit entry.
func TestEndSaleRetriedAfterTheGateFailed(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := testenv.NewClock(now)
	vouchers := memory.NewVouchers()
	gate := memory.NewGate(clock)
	sale, _ := domain.NewSale(5, now.Add(-time.Hour), now.Add(time.Hour))
	v, _ := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "t"}, sale)
	v, err := vouchers.AddSeckill(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	if err := gate.Preheat(ctx, v); err != nil {
		t.Fatal(err)
	}
	faulty := &failingControls{GateControls: gate, fail: 1}
	h := application.NewControlSale(vouchers, faulty, clock)
	claim := func(id domain.OrderID, user domain.UserID) error {
		o, _ := domain.NewVoucherOrder(id, user, v.ID())
		return gate.Reserve(ctx, o)
	}

	if _, err := h.EndNow(ctx, 9, v.ID()); err == nil {
		t.Fatal("EndNow answered success although the gate's write failed")
	}
	if stored, _ := vouchers.Get(ctx, v.ID()); !stored.Sale().End().Equal(now) {
		t.Fatalf("stored end %s, want now", stored.Sale().End())
	}
	if err := claim(1, 1); err != nil {
		t.Fatalf("the gate was not written, so it still sells: %v", err)
	}
	got, err := h.EndNow(ctx, 9, v.ID())
	if err != nil || !got.Sale().End().Equal(now) {
		t.Fatalf("retry: %v, end %s", err, got.Sale().End())
	}
	if err := claim(2, 2); !errors.Is(err, domain.ErrEnded) {
		t.Fatalf("claim after the retry: %v, want ended", err)
	}
	trail, err := memory.NewAuditLog(vouchers).List(ctx, ports.AuditQuery{Voucher: v.ID(), Limit: 10})
	if err != nil || len(trail) != 1 || trail[0].Action() != domain.ActionEndSale {
		t.Fatalf("audit trail %v (%v), want one sale.end", trail, err)
	}
}
