package application_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// failingPreheat fails the first Preheat, as a Redis that times out does:
// the admin gets a 500 and retries.
type failingPreheat struct {
	ports.StockGate
	failures int
}

func (g *failingPreheat) Preheat(ctx context.Context, v domain.Voucher) error {
	if g.failures > 0 {
		g.failures--
		return errors.New("injected: redis timeout")
	}
	return g.StockGate.Preheat(ctx, v)
}

func seckillVoucher(t *testing.T, stock int) domain.Voucher {
	t.Helper()
	sale, err := domain.NewSale(stock, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 3, Title: "retry", PayValue: 1, ActualValue: 2}, sale)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// An admin's retry after a 500 used to create a second voucher with the same
// stock. With the same Idempotency-Key it gets the first one back, claimable.
func TestAddVoucherRetryWithTheSameKeyReturnsTheSameVoucher(t *testing.T) {
	w := newWorld(t, 10, func(g ports.StockGate) ports.StockGate { return &failingPreheat{StockGate: g, failures: 1} })
	ctx := context.Background()
	v := seckillVoucher(t, 2)
	first, err := w.add.HandleOnce(ctx, testAdmin, "create-42", v)
	if err == nil {
		t.Fatal("the injected preheat failure was not reported")
	}
	again, err := w.add.HandleOnce(ctx, testAdmin, "create-42", v)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if again.ID() != first.ID() {
		t.Fatalf("retry returned voucher %d, the first attempt created %d", again.ID(), first.ID())
	}
	if list, _ := w.vouchers.ListByShop(ctx, 3, application.MaxShopVouchers); len(list) != 1 {
		t.Fatalf("shop lists %d vouchers after a retry, want 1", len(list))
	}
	if _, err := w.claim.Handle(ctx, 1, again.ID()); err != nil {
		t.Fatalf("the retried voucher is not claimable: %v", err)
	}
	// A second retry after claims were served keeps them.
	if _, err := w.add.HandleOnce(ctx, testAdmin, "create-42", v); err != nil {
		t.Fatal(err)
	}
	if _, err := w.claim.Handle(ctx, 1, again.ID()); !errors.Is(err, domain.ErrAlreadyClaimed) {
		t.Fatalf("a retry reset the gate: user 1 claims again: %v", err)
	}
}

func TestAddVoucherKeyReusedForAnotherVoucherIsRefused(t *testing.T) {
	w := newWorld(t, 10, nil)
	ctx := context.Background()
	if _, err := w.add.HandleOnce(ctx, testAdmin, "k1", seckillVoucher(t, 2)); err != nil {
		t.Fatal(err)
	}
	_, err := w.add.HandleOnce(ctx, testAdmin, "k1", seckillVoucher(t, 3))
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || ve.Field != "Idempotency-Key" {
		t.Fatalf("key reused with other values: %v, want a validation error on Idempotency-Key", err)
	}
	if list, _ := w.vouchers.ListByShop(ctx, 3, application.MaxShopVouchers); len(list) != 1 {
		t.Fatalf("shop lists %d vouchers, want 1", len(list))
	}
	for _, bad := range []string{"has space", string(make([]byte, 200))} {
		if _, err := w.add.HandleOnce(ctx, testAdmin, bad, seckillVoucher(t, 2)); !errors.As(err, &ve) {
			t.Fatalf("key %q: %v, want a validation error", bad, err)
		}
	}
}

// testAdmin is the admin every test creation is made by.
const testAdmin domain.UserID = 900_001

// Every creation leaves one audit entry naming its admin, its voucher and
// the fields asked for; a retry under the same key (after a 500) leaves
// none, nor does a key reused for another voucher.
func TestAddVoucherIsAuditedOnceWhateverTheRetries(t *testing.T) {
	w := newWorld(t, 10, func(g ports.StockGate) ports.StockGate { return &failingPreheat{StockGate: g, failures: 1} })
	ctx := context.Background()
	audit := memory.NewAuditLog(w.vouchers)
	v := seckillVoucher(t, 2)
	first, _ := w.add.HandleOnce(ctx, testAdmin, "create-7", v) // preheat fails: a 500, the voucher stored
	if _, err := w.add.HandleOnce(ctx, testAdmin, "create-7", v); err != nil {
		t.Fatal(err)
	}
	if _, err := w.add.HandleOnce(ctx, testAdmin, "create-7", seckillVoucher(t, 3)); err == nil {
		t.Fatal("key reused for another voucher was accepted")
	}
	plain, err := w.add.Handle(ctx, testAdmin+1, seckillVoucher(t, 5))
	if err != nil {
		t.Fatal(err)
	}
	got, err := audit.List(ctx, ports.AuditQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d audit entries, want 2 (one per voucher created): %v", len(got), got)
	}
	newest, oldest := got[0], got[1]
	if newest.Voucher() != plain.ID() || newest.Admin() != testAdmin+1 || oldest.Voucher() != first.ID() || oldest.Admin() != testAdmin {
		t.Fatalf("entries name (voucher %d, admin %d), (voucher %d, admin %d); want (%d, %d), (%d, %d)",
			newest.Voucher(), newest.Admin(), oldest.Voucher(), oldest.Admin(), plain.ID(), testAdmin+1, first.ID(), testAdmin)
	}
	var change map[string]any
	if err := json.Unmarshal([]byte(oldest.Change()), &change); err != nil {
		t.Fatal(err)
	}
	if oldest.Action() != domain.ActionCreateVoucher || change["stock"] != float64(2) || change["title"] != "retry" ||
		change["idempotencyKey"] != "create-7" || oldest.At().IsZero() {
		t.Fatalf("entry %v: change %s", oldest.Action(), oldest.Change())
	}
}

func TestAddVoucherNeedsItsAdmin(t *testing.T) {
	w := newWorld(t, 10, nil)
	var ve *domain.ValidationError
	if _, err := w.add.Handle(context.Background(), 0, seckillVoucher(t, 2)); !errors.As(err, &ve) || ve.Field != "admin" {
		t.Fatalf("creation by no admin: %v, want a validation error on admin", err)
	}
	if list, _ := w.vouchers.ListByShop(context.Background(), 3, application.MaxShopVouchers); len(list) != 0 {
		t.Fatalf("a refused creation stored %d vouchers", len(list))
	}
}
