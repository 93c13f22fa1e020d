package application

import (
	"context"
	"errors"
	"testing"
	"time"
)

type budgetKey struct{}

// TestClaimContextEndsWithinItsBudget: a claim's context ends at its deadline
// rounded down to its slot (never later), carries its caller's values but not
// its cancellation, and claims whose deadlines share a slot share one timer.
func TestClaimContextEndsWithinItsBudget(t *testing.T) {
	var b SharedDeadlines
	parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), budgetKey{}, "v"))
	deadline := time.Now().Add(50 * time.Millisecond)
	ctx := b.Context(parent, deadline)
	got, ok := ctx.Deadline()
	if !ok || got.After(deadline) || deadline.Sub(got) >= budgetSlotWidth {
		t.Fatalf("deadline %v, want within %v before %v", got, budgetSlotWidth, deadline)
	}
	if v := ctx.Value(budgetKey{}); v != "v" {
		t.Fatalf("value %v, want the caller's", v)
	}
	cancelParent()
	if ctx.Err() != nil {
		t.Fatalf("the caller's cancel ended the claim: %v", ctx.Err())
	}
	if b.Context(parent, deadline.Add(time.Microsecond)).(*claimContext).Context != ctx.(*claimContext).Context {
		t.Fatal("claims ending in the same slot do not share a timer")
	}
	child, stop := context.WithCancel(ctx)
	defer stop()
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the claim's context never ended")
	}
	if now := time.Now(); now.Before(got) {
		t.Fatalf("ended at %v, before its deadline %v", now, got)
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Fatalf("errors %v / %v, want DeadlineExceeded", ctx.Err(), child.Err())
	}
	if context.Cause(ctx) != context.DeadlineExceeded {
		t.Fatalf("cause %v, want DeadlineExceeded (not the caller's cancel)", context.Cause(ctx))
	}
	// An earlier deadline than the latest slot's still gets its own.
	early := b.Context(parent, time.Now().Add(-time.Second))
	if !errors.Is(early.Err(), context.DeadlineExceeded) {
		t.Fatalf("a past deadline: %v, want DeadlineExceeded", early.Err())
	}
}

// maxLiveBudgetTimers bounds the timers a stampede's budgets keep alive at
// once: the runtime walks its whole timer heap when a modified timer comes
// due, so 2,000 of them (1ms slots) cost a tenth of the service's CPU.
const maxLiveBudgetTimers = 256

// TestStampedeBudgetsShareFewTimers: claims starting every 100µs for a whole
// budget, each ending ClaimBudget later, hold at most maxLiveBudgetTimers
// distinct timer contexts (slots), however many claims there are.
func TestStampedeBudgetsShareFewTimers(t *testing.T) {
	var b SharedDeadlines
	start := time.Now()
	slots := map[context.Context]bool{}
	for at := time.Duration(0); at < ClaimBudget; at += 100 * time.Microsecond {
		slots[b.slot(start.Add(at+ClaimBudget))] = true
	}
	if claims := int(ClaimBudget / (100 * time.Microsecond)); len(slots) > maxLiveBudgetTimers {
		t.Fatalf("%d claims over one budget hold %d timers, want at most %d", claims, len(slots), maxLiveBudgetTimers)
	}
}
