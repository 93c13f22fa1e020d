package application

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// ClaimSeckill is the hot path: issue an order ID and have the admission
// reserve the stock and the user's one order and hand the order to
// fulfilment. It never touches the database. Its steps, and their order,
// are all in Claim: to change what a claim checks first, change Claim.
// The optional steps are set by its With methods, each returning h, before
// h is shared.
type ClaimSeckill struct {
	ids       ports.OrderIDs
	admission ports.Admission
	rooms     *WaitingRoom  // nil: no sale has a waiting room
	marks     *SoldOutMarks // nil: every claim asks the admission
	recorder  ClaimRecorder // nil: the answers are told to no one
	deadline  SharedDeadlines
}

// ClaimBudget is how long a claim may take once started, whatever the caller:
// every wait of the claim (the order id lease, the sold-out probe, a Redis
// connection, Redis's answer) ends with it. A healthy claim takes about a
// millisecond; two seconds rides out a hiccup (a failover's first retry)
// and still answers a stalled backend before a user retrying by hand
// would. A claim that runs out of it is answered as its step answers:
// ErrBusy before anything was reserved, then as ports.Admission.Admit says.
const ClaimBudget = 2 * time.Second

// ErrBusy: the claim was not taken and nothing changed (the queue was full or
// closing, Redis could not be reached before anything was reserved, or the
// claim ran out of time and was undone), so the client may try again. It
// wraps the cause.
var ErrBusy = errors.New("service busy")

// ErrOutcomeUnknown: the claim may have been taken (the admission failed in
// a way it cannot undo: ports.Admission.Admit). The error is an
// *OutcomeUnknownError carrying the order's ID, which the order status then
// resolves: queued or created if the script ran, not found if it did not.
var ErrOutcomeUnknown = errors.New("claim outcome unknown")

// OutcomeUnknownError is ErrOutcomeUnknown with the order's ID.
type OutcomeUnknownError struct {
	Order domain.OrderID
	Err   error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("admit order %d: %v: %v", e.Order, ErrOutcomeUnknown, e.Err)
}

func (e *OutcomeUnknownError) Unwrap() []error { return []error{ErrOutcomeUnknown, e.Err} }

func NewClaimSeckill(ids ports.OrderIDs, admission ports.Admission) *ClaimSeckill {
	mustHave("ClaimSeckill", map[string]any{"ids": ids, "admission": admission})
	return &ClaimSeckill{ids: ids, admission: admission}
}

// WithRooms makes the waiting room's pass the claim's first step (Claim).
func (h *ClaimSeckill) WithRooms(rooms *WaitingRoom) *ClaimSeckill {
	h.rooms = rooms
	return h
}

// WithSoldOutMarks makes this instance's sold-out marks a step of every claim
// (and SoldOut the edge's pre-check). The gate's calls that may return stock
// must clear them (marks.Gate).
func (h *ClaimSeckill) WithSoldOutMarks(marks *SoldOutMarks) *ClaimSeckill {
	h.marks = marks
	return h
}

// WithRecorder makes r the claim's last step: told how every claim was
// answered.
func (h *ClaimSeckill) WithRecorder(r ClaimRecorder) *ClaimSeckill {
	h.recorder = r
	return h
}

// ClaimRecorder is told once how each claim was answered, from the sold-out
// step on (a claim refused for its waiting-room pass is not): answer is the
// claim's error (nil: taken), fromMark whether it was answered sold out
// from this instance's mark, without asking the gate. The live sale page's
// counts implement it (metrics.ClaimCounter); it runs on the claim path, so
// it must not wait.
type ClaimRecorder interface {
	ClaimAnswered(v domain.VoucherID, answer error, fromMark bool)
}

// SoldOut is the claim's sold-out step asked before the claim runs, for an
// answer that needs no session (stock is public): true when this instance's
// mark answers v sold out, and then recorded as that claim's answer, as
// Claim would. Always false without marks; no I/O, no lock.
func (h *ClaimSeckill) SoldOut(v domain.VoucherID) bool {
	if h.marks == nil || !h.marks.SoldOut(v) {
		return false
	}
	h.answered(v, domain.ErrSoldOut, true)
	return true
}

// MarksSoldOut tells whether SoldOut can answer yes (the claim has marks).
func (h *ClaimSeckill) MarksSoldOut() bool { return h.marks != nil }

func (h *ClaimSeckill) answered(v domain.VoucherID, answer error, fromMark bool) {
	if h.recorder != nil {
		h.recorder.ClaimAnswered(v, answer, fromMark)
	}
}

// Claim is one claim as a client makes it.
type Claim struct {
	User    domain.UserID
	Voucher domain.VoucherID
	// Pass gives the claim's waiting-room pass; it is read only for a sale
	// with a room (nil: none).
	Pass PassSource
	// Arrived is when the request arrived: the claim's budget counts from
	// then, so what the caller already waited (a session lookup on Redis)
	// comes off it.
	Arrived time.Time
}

// PassSource gives a claim's waiting-room pass when asked: a sale without a
// room never asks, so its claims do not even read it.
type PassSource interface{ RoomPass() string }

// Claimed is a claim that was taken.
type Claimed struct {
	Order domain.OrderID
	// PassUnspent is why the pass the claim used could not be recorded as
	// spent (nil when it was, or there was none): the order stands, and the
	// pass stays usable until it lapses. For the caller's log.
	PassUnspent error
}

// Claim runs a claim's steps, in this order:
//
//  1. the waiting room: a sale with a room needs this user's valid, unspent
//     pass (domain.ErrPassRequired, ErrPassExpired, ErrAlreadyClaimed),
//     checked by its signature before any Redis work on the stock;
//  2. the sold-out mark: answered from memory while the gate said sold out
//     less than a window ago (SoldOutMarks);
//  3. the order's ID (ports.OrderIDs, leased in blocks);
//  4. its admission (ports.Admission): the gate's stock and one order per
//     user, the hand-off to fulfilment; its answer renews or clears the
//     mark;
//  5. the answer recorded (ClaimRecorder);
//  6. the pass spent, once the order is taken.
//
// Business refusals come back as *domain.Refusal errors, and a claim not
// taken as ErrBusy; either way nothing changed, and the order ID was handed
// back. A claim that may have been taken (Redis failed after the admission
// was sent) comes back as an *OutcomeUnknownError carrying its order ID. A
// sale without a room costs step 1 a map lookup.
func (h *ClaimSeckill) Claim(ctx context.Context, c Claim) (Claimed, error) {
	if err := ctx.Err(); err != nil {
		return Claimed{}, err
	}
	// One budget from the claim's arrival, detached from the caller: once
	// the admission may have reserved, a client hanging up must not cut
	// the claim in half, and before that finishing costs at most the budget.
	ctx = h.deadline.Context(ctx, c.Arrived.Add(ClaimBudget))
	// 1. The waiting room's pass.
	place := int64(-1)
	if h.rooms != nil {
		var err error
		if place, err = h.rooms.Check(ctx, c.Voucher, c.User, c.Pass); err != nil {
			return Claimed{}, err
		}
	}
	// 2 to 5 (take).
	id, err := h.take(ctx, c.User, c.Voucher)
	if err != nil || place < 0 {
		return Claimed{Order: id}, err
	}
	// 6. The pass spent. Accounting only: the order is taken whatever
	// happens here, and a place not marked spent frees itself when its pass
	// lapses.
	spend, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	return Claimed{Order: id, PassUnspent: h.rooms.Used(spend, c.Voucher, c.User, place)}, nil
}

// take is Claim's steps 2 to 5, within ctx's budget.
func (h *ClaimSeckill) take(ctx context.Context, user domain.UserID, voucher domain.VoucherID) (domain.OrderID, error) {
	// 2. The sold-out mark.
	var probe soldOutProbe
	if h.marks != nil {
		var err error
		if probe, err = h.marks.check(ctx, voucher); err != nil {
			h.answered(voucher, err, err == domain.ErrSoldOut)
			return 0, err
		}
	}
	// 3 and 4. The order's ID and its admission.
	id, admitted, err := h.admit(ctx, user, voucher)
	if h.marks != nil {
		h.marks.settle(voucher, probe, admitted)
	}
	// 5. The answer recorded.
	h.answered(voucher, err, false)
	return id, err
}

// admit issues the order's ID and admits the order. It returns the claim's
// answer, and admitted, the admission's own (or why it was not asked), for
// the sold-out mark.
func (h *ClaimSeckill) admit(ctx context.Context, user domain.UserID, voucher domain.VoucherID) (id domain.OrderID, admitted, err error) {
	id, err = h.ids.Next(ctx)
	if err != nil {
		// Nothing was reserved yet, whatever went wrong (out of time, Redis
		// unreachable, the day's sequence exhausted): nothing changed, and
		// the client may try again (ports.ErrNotAdmitted: nothing was
		// admitted, which is how the recorder tells busy from an error).
		err = fmt.Errorf("issue order id: %w: %w: %w", ErrBusy, ports.ErrNotAdmitted, err)
		return 0, err, err
	}
	order, err := domain.NewVoucherOrder(id, user, voucher)
	if err != nil {
		return 0, err, err
	}

	admitted = h.admission.Admit(ctx, order)
	switch {
	case admitted == nil:
		return id, nil, nil
	case domain.IsRefusal(admitted):
		// Nothing was written under this ID: the next claim may use it, so
		// refusals (most answers of a stampede) do not exhaust the day's IDs.
		h.ids.Unused(id)
		return 0, admitted, admitted
	case errors.Is(admitted, ports.ErrNotAdmitted):
		// Undone, but the ID was written to the gate before the undo: do not
		// hand it back, so no later order ever shares it with a stale mark.
		return 0, admitted, fmt.Errorf("admit %s: %w: %w", order, ErrBusy, admitted)
	}
	// The admission may have taken the order and cannot tell: the ID stays
	// spent, and the client gets it to ask the order's status.
	return 0, admitted, &OutcomeUnknownError{Order: id, Err: admitted}
}

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
