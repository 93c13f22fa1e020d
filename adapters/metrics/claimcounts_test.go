package metrics_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

func TestCountsEachOutcomePerVoucher(t *testing.T) {
	answers := []error{nil, nil, domain.ErrSoldOut, fmt.Errorf("wrapped: %w", domain.ErrAlreadyClaimed),
		fmt.Errorf("admit: %w: %w", application.ErrBusy, fmt.Errorf("full: %w", ports.ErrNotAdmitted)),
		fmt.Errorf("issue order id: %w: %w", application.ErrBusy, errors.New("redis down")),
		&application.OutcomeUnknownError{Order: 1, Err: errors.New("redis down")}}
	c := metrics.NewClaimCounter()
	for _, err := range answers {
		c.ClaimAnswered(7, err, false)
	}
	got := c.Claims(7)
	// An order id that could not be issued (Redis unreachable) is busy to
	// the client but counts as an error: the admission never said "not
	// admitted".
	want := map[string]int64{"success": 2, "sold_out": 1, "duplicate": 1, "busy": 1, "error": 2, "not_started": 0, "ended": 0, "not_found": 0}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("claims = %v, want %v", got, want)
		}
	}
	if other := c.Claims(8); other["success"] != 0 {
		t.Fatalf("voucher 8 counted %v", other)
	}
	if c.Saved() != 0 {
		t.Fatalf("saved %d, want 0: no answer came from the mark", c.Saved())
	}
}

// A bot claiming made-up voucher ids gets not_found; that must not make an
// entry per id.
func TestNotFoundOfUnknownVoucherMakesNoEntry(t *testing.T) {
	c := metrics.NewClaimCounter()
	for v := 1; v <= 3; v++ {
		c.ClaimAnswered(domain.VoucherID(v), domain.ErrVoucherNotFound, false)
	}
	if got := c.Claims(1)["not_found"]; got != 0 {
		t.Fatalf("not_found of unknown voucher counted: %d", got)
	}
}

func TestConcurrentClaimsAreAllCounted(t *testing.T) {
	c := metrics.NewClaimCounter()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for n := 0; n < 500; n++ {
				c.ClaimAnswered(domain.VoucherID(1+n%3), nil, false)
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

// A claim answered sold out from the mark (by the claim, or at the HTTP
// edge before its session) counts as sold out and as saved.
func TestCountsSoldOutAnswersFromTheMark(t *testing.T) {
	c := metrics.NewClaimCounter()
	for range 3 {
		c.ClaimAnswered(7, domain.ErrSoldOut, true)
	}
	c.ClaimAnswered(7, domain.ErrSoldOut, false) // the gate's answer: not saved
	if got := c.Claims(7)["sold_out"]; got != 4 {
		t.Fatalf("sold_out of voucher 7 = %d, want 4", got)
	}
	if got := c.Claims(8)["sold_out"]; got != 0 {
		t.Fatalf("sold_out of voucher 8 = %d, want 0", got)
	}
	if got := c.Saved(); got != 3 {
		t.Fatalf("saved %d, want 3", got)
	}
}
