package contract_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestGateControlsContract: GateControls.SetEnd over every gate (memory,
// the Redis gate and split vouchers on miniredis, a real Redis and the
// cluster): an end set to now makes the next claim answer ended; an end set
// later again reopens the sale with its stock and buyers as they were; a
// voucher the gate does not hold stays absent.
func TestGateControlsContract(t *testing.T) {
	ctx := context.Background()
	for _, b := range returnBackends() {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)(t, false)
			g, ok := s.gate.(ports.GateControls)
			if !ok {
				t.Fatalf("%T is not a GateControls", s.gate)
			}
			v := s.voucher(t, 41, 4)
			if err := s.gate.Preheat(ctx, v); err != nil {
				t.Fatal(err)
			}
			orderOf := func(id domain.OrderID, user domain.UserID, voucher domain.VoucherID) domain.VoucherOrder {
				o, err := domain.NewVoucherOrder(id, user, voucher)
				if err != nil {
					t.Fatal(err)
				}
				return o
			}
			order := func(id domain.OrderID, user domain.UserID) domain.VoucherOrder { return orderOf(id, user, v.ID()) }
			if err := s.reserve(ctx, order(1, 1)); err != nil {
				t.Fatalf("claim before the end: %v", err)
			}
			ended, err := v.Sale().EndNow(testenv.WallClock{}.Now())
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // idempotent
				if err := g.SetEnd(ctx, v.WithSale(ended)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.reserve(ctx, order(2, 2)); !errors.Is(err, domain.ErrEnded) {
				t.Fatalf("claim after the end answered %v, want ended", err)
			}
			if err := g.SetEnd(ctx, v); err != nil {
				t.Fatal(err)
			}
			if err := s.reserve(ctx, order(3, 3)); err != nil {
				t.Fatalf("claim after the end moved later: %v", err)
			}
			if err := s.reserve(ctx, order(4, 1)); !errors.Is(err, domain.ErrAlreadyClaimed) {
				t.Fatalf("the first buyer claims again: %v, want duplicate", err)
			}
			absent := s.voucher(t, 42, 4)
			if err := g.SetEnd(ctx, absent); err != nil {
				t.Fatal(err)
			}
			if err := s.reserve(ctx, orderOf(5, 5, absent.ID())); !errors.Is(err, domain.ErrVoucherNotFound) {
				t.Fatalf("claim of a voucher SetEnd was given but the gate never held: %v, want not_found", err)
			}
		})
	}
}
