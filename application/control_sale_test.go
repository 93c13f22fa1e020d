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

func (f *failingControls) Apply(ctx context.Context, v domain.Voucher) error {
	if f.fail > 0 {
		f.fail--
		return errors.New("redis: i/o timeout")
	}
	return f.GateControls.Apply(ctx, v)
}

// controlledSale is a sale of stock units on for an hour either side of
// now, stored in memory and preheated in the memory gate.
func controlledSale(t *testing.T, stock int) (time.Time, *testenv.Clock, *memory.Vouchers, *memory.Gate, domain.Voucher) {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := testenv.NewClock(now)
	vouchers := memory.NewVouchers()
	gate := memory.NewGate(clock)
	sale, _ := domain.NewSale(stock, now.Add(-time.Hour), now.Add(time.Hour))
	v, _ := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "t"}, sale)
	v, err := vouchers.AddSeckill(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	if err := gate.Preheat(ctx, v); err != nil {
		t.Fatal(err)
	}
	return now, clock, vouchers, gate, v
}

// TestEndSaleRetriedAfterTheGateFailed: the database commits the end with
// its audit entry before the gate is written; when the gate's write fails
// the control answers an error, claims still pass, and the admin's retry
// writes the gate from the stored sale without a second audit entry.
func TestEndSaleRetriedAfterTheGateFailed(t *testing.T) {
	ctx := context.Background()
	now, clock, vouchers, gate, v := controlledSale(t, 5)
	faulty := &failingControls{GateControls: gate, fail: 1}
	h := application.NewControlSale(vouchers, faulty, clock)
	claim := func(id domain.OrderID, user domain.UserID) error {
		o, _ := domain.NewVoucherOrder(id, user, v.ID())
		return gate.Reserve(ctx, o)
	}

	if _, err := h.EndNow(ctx, 9, v.ID()); !errors.Is(err, application.ErrBusy) {
		t.Fatalf("EndNow with the gate's write failed: %v, want busy (stored; retry)", err)
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

// TestAddStockFinishedByTheRepairAfterTheGateFailed: the database commits
// the added units; the gate's write fails (a Redis timeout, or the process
// killed between the two steps); the periodic repair applies them to the
// gate, once however often it runs, so the gate and the database agree.
func TestAddStockFinishedByTheRepairAfterTheGateFailed(t *testing.T) {
	ctx := context.Background()
	_, clock, vouchers, gate, v := controlledSale(t, 2)
	orders := memory.NewOrders(vouchers)
	h := application.NewControlSale(vouchers, &failingControls{GateControls: gate, fail: 1}, clock)
	if _, err := h.AddStock(ctx, 9, v.ID(), 3, ""); !errors.Is(err, application.ErrBusy) {
		t.Fatalf("AddStock with the gate's write failed: %v, want busy (stored; retry)", err)
	}
	if stored, _ := vouchers.Get(ctx, v.ID()); stored.Sale().Stock() != 5 || stored.Sale().Added() != 3 {
		t.Fatalf("stored stock %d added %d, want 5 and 3", stored.Sale().Stock(), stored.Sale().Added())
	}
	repair := application.NewRestoreGate(vouchers, orders, gate, gate, clock).WithControls(gate)
	for range 2 {
		if _, err := repair.Repair(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, _, _ := gate.Stock(ctx, v.ID()); n != 5 {
		t.Fatalf("gate stock %d after the repair, want 5 (2 + 3, once)", n)
	}
	// The next addition goes through at once, and only adds its own units.
	if got, err := h.AddStock(ctx, 9, v.ID(), 1, ""); err != nil || got.Sale().Stock() != 6 {
		t.Fatalf("second addition: %v, stock %d", err, got.Sale().Stock())
	}
	if n, _, _ := gate.Stock(ctx, v.ID()); n != 6 {
		t.Fatalf("gate stock %d, want 6", n)
	}
}

// TestRepairRestoresWhileAControlIsRefused: the gate refuses a sale's
// controls while a restore has its buckets frozen, and the restore that
// unfreezes them runs in the same repair: a refused control must not stop
// it (it would stay frozen, every claim busy, for good). The repair still
// says the control failed, and a later one applies it.
func TestRepairRestoresWhileAControlIsRefused(t *testing.T) {
	ctx := context.Background()
	_, clock, vouchers, gate, v := controlledSale(t, 2)
	h := application.NewControlSale(vouchers, gate, clock)
	if _, err := h.AddStock(ctx, 9, v.ID(), 3, ""); err != nil {
		t.Fatal(err)
	}
	gate.Forget(v.ID())
	refusing := &failingControls{GateControls: gate, fail: 1}
	repair := application.NewRestoreGate(vouchers, memory.NewOrders(vouchers), gate, gate, clock).WithControls(refusing)
	rep, err := repair.Repair(ctx)
	if err == nil || rep.Restored != 1 {
		t.Fatalf("repair with the control refused = %+v, %v; want the gate restored and the error told", rep, err)
	}
	if _, err := repair.Repair(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := gate.Stock(ctx, v.ID()); n != 5 {
		t.Fatalf("gate stock %d, want 5 (2 + 3, once)", n)
	}
}

// TestSaleControlsRefusedOnAnEndedSale: stock and pause are refused with
// sale_over once the sale has ended, and bad amounts are validation errors.
func TestSaleControlsRefusedOnAnEndedSale(t *testing.T) {
	ctx := context.Background()
	now, clock, vouchers, gate, v := controlledSale(t, 2)
	h := application.NewControlSale(vouchers, gate, clock)
	for _, n := range []int{0, -1, domain.MaxStock} {
		var ve *domain.ValidationError
		if _, err := h.AddStock(ctx, 9, v.ID(), n, ""); !errors.As(err, &ve) {
			t.Fatalf("add %d: %v, want a validation error", n, err)
		}
	}
	clock.Advance(2 * time.Hour)
	for name, call := range map[string]func() (domain.Voucher, error){
		"stock":  func() (domain.Voucher, error) { return h.AddStock(ctx, 9, v.ID(), 1, "") },
		"pause":  func() (domain.Voucher, error) { return h.Pause(ctx, 9, v.ID()) },
		"moveTo": func() (domain.Voucher, error) { return h.MoveEnd(ctx, 9, v.ID(), now.Add(3*time.Hour)) },
	} {
		if _, err := call(); !errors.Is(err, domain.ErrSaleOver) {
			t.Fatalf("%s on an ended sale: %v, want sale_over", name, err)
		}
	}
	if got, err := h.Resume(ctx, 9, v.ID()); err != nil || got.Sale().Paused() {
		t.Fatalf("resuming a sale that is not paused changes nothing: %v", err)
	}
}
