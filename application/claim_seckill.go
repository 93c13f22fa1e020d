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
// reserve the stock and hand the order to fulfilment, without the database.
// Its steps, in order, are all in Claim. Set the With options before sharing h.
type ClaimSeckill struct {
	ids       ports.OrderIDs
	admission ports.Admission
	rooms     *WaitingRoom  // nil: no sale has a waiting room
	marks     *SoldOutMarks // nil: every claim asks the admission
	recorder  ClaimRecorder // nil: the answers are told to no one
	deadline  SharedDeadlines
}

// ClaimBudget bounds every wait of a claim from its arrival: it rides out a
// failover's first retry and still answers before a user retrying by hand would.
const ClaimBudget = 2 * time.Second

// ErrBusy: nothing changed and the client may try again. It wraps the cause.
var ErrBusy = errors.New("service busy")

// ErrOutcomeUnknown: the claim may have been taken; the *OutcomeUnknownError
// carries the order's ID, whose status then tells.
var ErrOutcomeUnknown = errors.New("claim outcome unknown")

type OutcomeUnknownError struct {
	Order domain.OrderID
	Err   error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("admit order %d: %v: %v", e.Order, ErrOutcomeUnknown, e.Err)
}

func (e *OutcomeUnknownError) Unwrap() []error { return []error{ErrOutcomeUnknown, e.Err} }

func NewClaimSeckill(ids ports.OrderIDs, admission ports.Admission) *ClaimSeckill {
	mustHave("ClaimSeckill", "ids", ids, "admission", admission)
	return &ClaimSeckill{ids: ids, admission: admission}
}

func (h *ClaimSeckill) WithRooms(rooms *WaitingRoom) *ClaimSeckill {
	h.rooms = rooms
	return h
}

// WithSoldOutMarks: the gate must clear the marks (marks.Gate).
func (h *ClaimSeckill) WithSoldOutMarks(marks *SoldOutMarks) *ClaimSeckill {
	h.marks = marks
	return h
}

func (h *ClaimSeckill) WithRecorder(r ClaimRecorder) *ClaimSeckill {
	h.recorder = r
	return h
}

// ClaimRecorder is told once how each claim was answered from the sold-out step
// on (nil: taken; fromMark: from this instance's mark). It must not wait.
type ClaimRecorder interface {
	ClaimAnswered(v domain.VoucherID, answer error, fromMark bool)
}

// SoldOut is the claim's sold-out step asked before the session is read: true,
// and recorded as the claim's answer, when a mark answers v sold out.
func (h *ClaimSeckill) SoldOut(v domain.VoucherID) bool {
	if h.marks == nil || !h.marks.SoldOut(v) {
		return false
	}
	h.answered(v, domain.ErrSoldOut, true)
	return true
}

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
	Pass    PassSource // read only for a sale with a room (nil: none)
	Arrived time.Time  // the budget counts from here
}

// PassSource gives a claim's waiting-room pass, asked only for a sale with a room.
type PassSource interface{ RoomPass() string }

// Claimed is a claim that was taken. PassUnspent, for the caller's log, is
// why its pass could not be recorded spent: the order stands regardless.
type Claimed struct {
	Order       domain.OrderID
	PassUnspent error
}

// Claim runs a claim's numbered steps. Refusals are *domain.Refusal and a
// claim not taken ErrBusy, with nothing changed; a claim that may have been
// taken is an *OutcomeUnknownError.
func (h *ClaimSeckill) Claim(ctx context.Context, c Claim) (Claimed, error) {
	if err := ctx.Err(); err != nil {
		return Claimed{}, err
	}
	// Detached: a client hanging up must not cut the claim in half once the admission may have reserved.
	ctx = h.deadline.Context(ctx, c.Arrived.Add(ClaimBudget))
	var err error
	// 1. The waiting room's pass (WaitingRoom.Check), before any work on the stock.
	place := int64(-1)
	if h.rooms != nil {
		if place, err = h.rooms.Check(ctx, c.Voucher, c.User, c.Pass); err != nil {
			return Claimed{}, err
		}
	}
	// 2. The sold-out mark (SoldOutMarks).
	var probe soldOutProbe
	if h.marks != nil {
		if probe, err = h.marks.check(ctx, c.Voucher); err != nil {
			h.answered(c.Voucher, err, err == domain.ErrSoldOut)
			return Claimed{}, err
		}
	}
	// 3 and 4. The order's ID (ports.OrderIDs) and its admission (ports.Admission), whose answer renews or clears the mark.
	id, admitted, err := h.admit(ctx, c.User, c.Voucher)
	if h.marks != nil {
		h.marks.settle(c.Voucher, probe, admitted)
	}
	// 5. The answer recorded (ClaimRecorder).
	h.answered(c.Voucher, err, false)
	if err != nil || place < 0 {
		return Claimed{Order: id}, err
	}
	// 6. The pass spent: accounting only; an unspent place lapses with its pass.
	spend, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	return Claimed{Order: id, PassUnspent: h.rooms.Used(spend, c.Voucher, c.User, place)}, nil
}

// admit returns the claim's answer, and admitted, the admission's own (or
// why it was not asked), for the sold-out mark.
func (h *ClaimSeckill) admit(ctx context.Context, user domain.UserID, voucher domain.VoucherID) (id domain.OrderID, admitted, err error) {
	id, err = h.ids.Next(ctx)
	if err != nil {
		// Nothing was reserved yet; ports.ErrNotAdmitted tells the recorder busy.
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
		// Nothing was written under this ID: refusals must not exhaust the day's IDs.
		h.ids.Unused(id)
		return 0, admitted, admitted
	case errors.Is(admitted, ports.ErrNotAdmitted):
		// Undone, but the ID reached the gate: never reuse it.
		return 0, admitted, fmt.Errorf("admit %s: %w: %w", order, ErrBusy, admitted)
	}
	return 0, admitted, &OutcomeUnknownError{Order: id, Err: admitted}
}

// SharedDeadlines hands out contexts whose deadline, rounded down to a slot,
// shares one timer per slot. The zero value is ready and safe for concurrent use.
type SharedDeadlines struct {
	latest atomic.Pointer[budgetSlot]
}

// budgetSlotWidth: wider slots mean fewer live timers for the runtime to walk;
// ending up to 10ms early of 2s is invisible to a client.
const budgetSlotWidth = 10 * time.Millisecond

type budgetSlot struct {
	n      int64 // deadline / budgetSlotWidth
	ctx    context.Context
	cancel context.CancelFunc // never called: the timer releases the slot
}

// Context ends at deadline (rounded down, never later), detached from
// parent's cancellation but carrying its values.
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
	// Add keeps the monotonic reading, so a wall-clock step moves nothing.
	at := deadline.Add(-time.Duration(ns - n*int64(budgetSlotWidth)))
	ctx, cancel := context.WithDeadline(context.Background(), at)
	next := &budgetSlot{n: n, ctx: ctx, cancel: cancel}
	if cur == nil || n > cur.n {
		// Losing this race costs only a context of one's own.
		b.latest.CompareAndSwap(cur, next)
	}
	return ctx
}

// claimContext: Deadline, Done and Err are its slot's, Value its caller's.
type claimContext struct {
	context.Context
	values context.Context
}

func (c *claimContext) Value(key any) any { return c.values.Value(key) }

// AfterFunc spares derived contexts a goroutine each (context's afterFuncer).
func (c *claimContext) AfterFunc(f func()) func() bool { return context.AfterFunc(c.Context, f) }
