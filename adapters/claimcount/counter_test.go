package claimcount_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/hmdp-go/seckill/adapters/claimcount"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

type admitFunc func(context.Context, domain.VoucherOrder) error

func (f admitFunc) Admit(ctx context.Context, o domain.VoucherOrder) error { return f(ctx, o) }

func order(t *testing.T, id int64, voucher domain.VoucherID) domain.VoucherOrder {
	t.Helper()
	o, err := domain.NewVoucherOrder(domain.OrderID(id), domain.UserID(id), voucher)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestCountsEachOutcomePerVoucher(t *testing.T) {
	answers := []error{nil, nil, domain.ErrSoldOut, fmt.Errorf("wrapped: %w", domain.ErrAlreadyClaimed),
		fmt.Errorf("full: %w", ports.ErrNotAdmitted), errors.New("redis down")}
	i := 0
	c := claimcount.New()
	a := c.Admission(admitFunc(func(context.Context, domain.VoucherOrder) error { i++; return answers[i-1] }))
	for range answers {
		_ = a.Admit(context.Background(), order(t, int64(i+1), 7))
	}
	got := c.Claims(7)
	want := map[string]int64{"success": 2, "sold_out": 1, "duplicate": 1, "busy": 1, "error": 1, "not_started": 0, "ended": 0, "not_found": 0}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("claims = %v, want %v", got, want)
		}
	}
	if other := c.Claims(8); other["success"] != 0 {
		t.Fatalf("voucher 8 counted %v", other)
	}
}

// A bot claiming made-up voucher ids gets not_found; that must not make an
// entry per id.
func TestNotFoundOfUnknownVoucherMakesNoEntry(t *testing.T) {
	c := claimcount.New()
	a := c.Admission(admitFunc(func(context.Context, domain.VoucherOrder) error { return domain.ErrVoucherNotFound }))
	for v := 1; v <= 3; v++ {
		_ = a.Admit(context.Background(), order(t, int64(v), domain.VoucherID(v)))
	}
	if got := c.Claims(1)["not_found"]; got != 0 {
		t.Fatalf("not_found of unknown voucher counted: %d", got)
	}
}

func TestConcurrentClaimsAreAllCounted(t *testing.T) {
	c := claimcount.New()
	a := c.Admission(admitFunc(func(context.Context, domain.VoucherOrder) error { return nil }))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for n := 0; n < 500; n++ {
				_ = a.Admit(context.Background(), order(t, int64(g*1000+n+1), domain.VoucherID(1+n%3)))
			}
		}()
	}
	close(start)
	wg.Wait()
	var sum int64
	for v := 1; v <= 3; v++ {
		sum += c.Claims(domain.VoucherID(v))["success"]
	}
	if sum != 4000 {
		t.Fatalf("counted %d successes, want 4000", sum)
	}
}

type signal map[domain.VoucherID]bool

func (s signal) SoldOut(id domain.VoucherID) bool { return s[id] }

// A claim answered sold out at the HTTP edge, before its session, never
// reaches the Admission: the signal's wrapper counts it.
func TestCountsSoldOutAnswersGivenBeforeTheSession(t *testing.T) {
	c := claimcount.New()
	s := c.SoldOut(signal{7: true})
	for range 3 {
		if !s.SoldOut(7) {
			t.Fatal("the wrapper changed the answer")
		}
	}
	if s.SoldOut(8) {
		t.Fatal("the wrapper said sold out for a voucher on sale")
	}
	if got := c.Claims(7)["sold_out"]; got != 3 {
		t.Fatalf("sold_out of voucher 7 = %d, want 3", got)
	}
	if got := c.Claims(8)["sold_out"]; got != 0 {
		t.Fatalf("sold_out of voucher 8 = %d, want 0", got)
	}
}
