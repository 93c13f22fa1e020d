package metrics_test

import (
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/domain"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// TestHistoryKeepsTheLastMinuteOfReadings: one reading a second, oldest
// first, the last HistoryLen only, each the counts as they were then.
func TestHistoryKeepsTheLastMinuteOfReadings(t *testing.T) {
	c := metrics.NewClaimCounter()
	const seconds = metrics.HistoryLen + 20
	for s := 0; s < seconds; s++ {
		c.ClaimAnswered(7, nil, false)
		c.Sample(t0.Add(time.Duration(s) * time.Second))
	}
	h := c.History(7)
	if len(h.At) != metrics.HistoryLen || len(h.Claims["success"]) != metrics.HistoryLen {
		t.Fatalf("history holds %d readings (%d success counts), want %d", len(h.At), len(h.Claims["success"]), metrics.HistoryLen)
	}
	first := seconds - metrics.HistoryLen
	for i, at := range h.At {
		if want := t0.Add(time.Duration(first+i) * time.Second); !at.Equal(want) {
			t.Fatalf("reading %d taken at %v, want %v", i, at, want)
		}
		if got, want := h.Claims["success"][i], int64(first+i+1); got != want {
			t.Fatalf("reading %d: %d successes, want %d", i, got, want)
		}
		if h.Claims["sold_out"][i] != 0 {
			t.Fatalf("reading %d counts sold-out answers that never happened", i)
		}
	}
	if h := c.History(8); h.At != nil {
		t.Fatalf("a voucher never claimed has a history: %+v", h)
	}
}

// TestHistoryIsBounded: a voucher quiet for a whole window gives its ring up
// (and gets one again when claimed), and no more than MaxHistories vouchers
// hold one at a time.
func TestHistoryIsBounded(t *testing.T) {
	c := metrics.NewClaimCounter()
	c.ClaimAnswered(7, nil, false)
	s := 0
	sample := func() { c.Sample(t0.Add(time.Duration(s) * time.Second)); s++ }
	for range metrics.HistoryLen {
		sample()
	}
	if len(c.History(7).At) == 0 {
		t.Fatal("the history was dropped before a whole window was flat")
	}
	sample()
	if h := c.History(7); h.At != nil {
		t.Fatalf("a voucher quiet for a minute keeps %d readings", len(h.At))
	}
	sample()
	if h := c.History(7); h.At != nil {
		t.Fatal("a quiet voucher got its ring back without a claim")
	}
	c.ClaimAnswered(7, nil, false)
	sample()
	if h := c.History(7); len(h.At) != 1 || h.Claims["success"][0] != 2 {
		t.Fatalf("a claim after the quiet spell: history %+v", h)
	}

	for v := domain.VoucherID(100); v < 100+2*metrics.MaxHistories; v++ {
		c.ClaimAnswered(v, nil, false)
	}
	sample()
	held := 0
	for v := domain.VoucherID(100); v < 100+2*metrics.MaxHistories; v++ {
		if c.History(v).At != nil {
			held++
		}
	}
	if held != metrics.MaxHistories-1 { // voucher 7 holds the other one
		t.Fatalf("%d vouchers hold a history, want %d", held, metrics.MaxHistories-1)
	}
}
