package application

import (
	"context"
	"sync/atomic"
	"time"
)

// SharedDeadlines hands out contexts with a deadline that many share: the
// claims' budgets, and the session store's lookup bounds (redissession). A
// context.WithDeadline per claim costs a timer context, a timer in the
// runtime's heap and its removal (about 2% of the service's CPU in a
// stampede); instead every claim whose deadline falls in the same slot
// (budgetSlotWidth) shares one timer context, and gets a small context of
// its own that carries its caller's values. The shared deadline is the
// claim's own rounded down to the slot, so a claim still never runs past its
// budget: it may end up to a slot early.
type SharedDeadlines struct {
	latest atomic.Pointer[budgetSlot]
}

// budgetSlotWidth is how many claims share a timer: those whose deadlines
// fall within it. Under load every slot of the next ClaimBudget has a live
// timer, ClaimBudget/budgetSlotWidth of them, and the runtime walks its whole
// timer heap whenever a modified timer (a connection's deadline: several per
// request) comes due: with 1ms slots, 2,000 live timers, that walk
// (runtime.(*timers).adjust) was 10% of the service's CPU in a wide sale with
// cold sessions, 1.4% with 10ms slots. A claim ending up to 10ms early of a
// 2s budget changes nothing a client can see.
const budgetSlotWidth = 10 * time.Millisecond

type budgetSlot struct {
	n   int64 // deadline / budgetSlotWidth
	ctx context.Context
	// cancel is never called: the slot ends at its deadline, when its
	// timer fires and releases it.
	cancel context.CancelFunc
}

// Context is a context ending at deadline (rounded down to its slot, never
// later), detached from parent's cancellation but carrying its values. The
// zero SharedDeadlines is ready; it is safe for concurrent use.
func (b *SharedDeadlines) Context(parent context.Context, deadline time.Time) context.Context {
	return &claimContext{Context: b.slot(deadline), values: context.WithoutCancel(parent)}
}

func (b *SharedDeadlines) slot(deadline time.Time) context.Context {
	ns := deadline.UnixNano()
	n := ns / int64(budgetSlotWidth)
	cur := b.latest.Load()
	if cur != nil && cur.n == n {
		return cur.ctx
	}
	// Add keeps the monotonic reading: a wall-clock step does not move
	// the deadline.
	at := deadline.Add(-time.Duration(ns - n*int64(budgetSlotWidth)))
	ctx, cancel := context.WithDeadline(context.Background(), at)
	next := &budgetSlot{n: n, ctx: ctx, cancel: cancel}
	if cur == nil || n > cur.n {
		// Losing this race costs only a context of one's own.
		b.latest.CompareAndSwap(cur, next)
	}
	return ctx
}

// claimContext is a claim's context: Deadline, Done and Err are its slot's,
// Value its caller's.
type claimContext struct {
	context.Context
	values context.Context
}

func (c *claimContext) Value(key any) any { return c.values.Value(key) }

// AfterFunc lets a context derived from this one be cancelled with its slot
// without a goroutine of its own watching it (context's afterFuncer).
func (c *claimContext) AfterFunc(f func()) func() bool { return context.AfterFunc(c.Context, f) }
