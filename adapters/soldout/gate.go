// Package soldout keeps a sold-out voucher's stampede away from Redis: its
// Admission decorator remembers a sold-out answer per voucher, and its Gate
// decorator forgets it whenever stock may have come back. Once the admission
// answers sold out for a
// voucher, this instance answers sold out itself, for a short window, without
// asking the gate again. In a flash sale almost every request arrives after
// the stock is gone, so this turns most of them into an in-memory answer.
//
// The staleness bound: a sold-out answer given from the mark is based on a
// gate answer at most Window old (default 500ms). When the window has passed,
// exactly one request per voucher re-checks the gate; requests that arrive
// while it does wait for its answer (one Redis round trip) and share it if
// it is sold out again, so they are never answered from an expired mark.
// Stock can come back (a released reservation, a re-preheated voucher): on
// this instance Preheat, Restore and Release of a voucher clear its mark at
// once; a change made elsewhere (another instance's Release, an operator's
// reconcile) is seen here at the latest Window after it happened.
package soldout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmdp-go/seckill/adapters/internal/stripe"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// DefaultWindow keeps a mark long enough that a stampede on a sold-out
// voucher costs about two gate calls per second per instance, and short
// enough that stock returned by another instance is offered again before a
// user retrying by hand notices.
const DefaultWindow = 500 * time.Millisecond

// MaxWindow bounds how stale a sold-out answer may be; beyond a few seconds
// users would see "sold out" for stock that is back on sale.
const MaxWindow = 10 * time.Second

// Options configures a Gate; zero values take the defaults.
type Options struct {
	// Window is how long a sold-out answer from the gate is reused (default
	// DefaultWindow, at most MaxWindow).
	Window time.Duration
	// Clock tells the time (default: the system clock).
	Clock ports.Clock
}

// Marks holds the per-voucher sold-out marks of this instance, shared by the
// Admission that sets them and the Gate that clears them. It is safe for
// concurrent use.
type Marks struct {
	window time.Duration
	clock  ports.Clock

	// clears counts every clear of any voucher. A Reserve remembers it before
	// asking the gate and marks only if no clear happened meanwhile: its sold
	// out answer may predate a Release that returned stock, and marking then
	// would hide that unit for a whole window. One counter for all vouchers
	// (instead of one per voucher) lets unmarked vouchers leave the map; a
	// clear elsewhere costs at most one missed mark, which is one more gate
	// call.
	clears atomic.Uint64
	saved  stripe.Counter

	// base anchors the marks' expiries: they are kept as time since base,
	// read from the clock's monotonic reading, so a step of the wall clock
	// moves none.
	base time.Time

	mu    sync.Mutex
	marks map[domain.VoucherID]*mark
	// view is a copy of marks, published (under mu) whenever a mark is
	// added or removed, which is rare: SoldOut, the sold-out edge's check
	// on every request of a stampede, reads it without the lock, which
	// moved its cache line between the cores on every answer.
	view atomic.Pointer[map[domain.VoucherID]*mark]
}

// mark is one voucher's remembered sold-out answer.
type mark struct {
	// until is when (since Marks.base) it stops being an answer; written
	// under Marks.mu, read without it. 0 once the mark is removed.
	until atomic.Int64
	// probe is non-nil while one request re-checks an expired mark; it is
	// closed when that request has settled the mark.
	probe chan struct{}
}

// Admission answers sold out from a fresh mark and passes everything else to
// the admission it wraps.
type Admission struct {
	*Marks
	next ports.Admission
}

// Gate passes every call to the gate it wraps, and clears a voucher's mark
// after each call that may return stock to it.
type Gate struct {
	*Marks
	next ports.StockGate
}

var (
	_ ports.Admission = (*Admission)(nil)
	_ ports.StockGate = (*Gate)(nil)
)

// New panics on a window outside (0, MaxWindow]: a wiring mistake that must
// stop the process at start.
func New(opts Options) *Marks {
	if opts.Window == 0 {
		opts.Window = DefaultWindow
	}
	if opts.Window < 0 || opts.Window > MaxWindow {
		panic(fmt.Sprintf("soldout: window must be within (0, %s], got %s", MaxWindow, opts.Window))
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	g := &Marks{window: opts.Window, clock: opts.Clock, base: opts.Clock.Now(), marks: make(map[domain.VoucherID]*mark)}
	g.publish()
	return g
}

// publish makes the view a copy of the marks; g.mu is held (or g is new).
func (g *Marks) publish() {
	view := make(map[domain.VoucherID]*mark, len(g.marks))
	for v, m := range g.marks {
		view[v] = m
	}
	g.view.Store(&view)
}

// now is the clock's time as marks keep it.
func (g *Marks) now() int64 { return int64(g.clock.Now().Sub(g.base)) }

// fresh tells whether m is still an answer.
func (g *Marks) fresh(m *mark) bool { return g.now() < m.until.Load() }

// remove forgets v's mark m; g.mu is held.
func (g *Marks) remove(v domain.VoucherID, m *mark) {
	m.until.Store(0)
	delete(g.marks, v)
	g.publish()
}

// Admission puts the marks in front of next.
func (g *Marks) Admission(next ports.Admission) *Admission {
	if next == nil {
		panic("soldout: Admission needs a non-nil ports.Admission")
	}
	return &Admission{Marks: g, next: next}
}

// Gate makes next's Preheat, Restore and Release clear the marks.
func (g *Marks) Gate(next ports.StockGate) *Gate {
	if next == nil {
		panic("soldout: Gate needs a non-nil ports.StockGate")
	}
	return &Gate{Marks: g, next: next}
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Window is the staleness bound of a sold-out answer.
func (g *Marks) Window() time.Duration { return g.window }

// Saved counts the claims answered from a mark, each a gate round trip not
// made (the bench reports it).
func (g *Marks) Saved() int64 { return g.saved.Load() }

var _ ports.SoldOutSignal = (*Marks)(nil)

// SoldOut reports whether v has a fresh mark, the same answer Admit would
// give from it (an expired mark is not an answer: Admit re-checks the gate).
// An answer given from it counts as saved.
func (g *Marks) SoldOut(v domain.VoucherID) bool {
	m := (*g.view.Load())[v]
	if m == nil || !g.fresh(m) {
		return false
	}
	g.saved.Add(1)
	return true
}

// Admit answers domain.ErrSoldOut from a fresh mark; otherwise it asks the
// admission it wraps, and a sold-out answer (re)starts the voucher's mark.
func (g *Admission) Admit(ctx context.Context, o domain.VoucherOrder) error {
	v := o.VoucherID()
	for {
		epoch := g.clears.Load()
		g.mu.Lock()
		m := g.marks[v]
		if m == nil {
			g.mu.Unlock()
			err := g.next.Admit(ctx, o)
			if errors.Is(err, domain.ErrSoldOut) {
				g.mark(v, epoch)
			}
			return err
		}
		if g.fresh(m) {
			g.mu.Unlock()
			g.saved.Add(1)
			return domain.ErrSoldOut
		}
		if m.probe != nil {
			// Someone is re-checking: wait for that one round trip rather
			// than answer from an expired mark or pile onto the gate.
			probe := m.probe
			g.mu.Unlock()
			select {
			case <-probe:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		m.probe = make(chan struct{})
		g.mu.Unlock()
		err := g.next.Admit(ctx, o)
		g.settleProbe(v, m, epoch, err)
		return err
	}
}

// mark starts (or restarts) v's mark, unless a clear happened since epoch.
func (g *Marks) mark(v domain.VoucherID, epoch uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.clears.Load() != epoch {
		return
	}
	m := g.marks[v]
	added := m == nil
	if added {
		m = &mark{}
		g.marks[v] = m
	}
	m.until.Store(g.now() + int64(g.window))
	if added {
		g.publish()
	}
}

// settleProbe records what the re-check found and wakes the waiters: sold out
// renews the mark; any other answer from the gate (it checks window and stock
// before anything else) means stock may be there, so the mark goes; an
// infrastructure error says nothing, so the mark stays expired and the next
// request re-checks.
func (g *Marks) settleProbe(v domain.VoucherID, m *mark, epoch uint64, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(m.probe)
	m.probe = nil
	if g.marks[v] != m {
		return // cleared meanwhile
	}
	switch {
	case g.clears.Load() != epoch:
		g.remove(v, m)
	case errors.Is(err, domain.ErrSoldOut):
		m.until.Store(g.now() + int64(g.window))
	case err == nil || domain.IsRefusal(err):
		g.remove(v, m)
	}
}

// clear forgets v's mark and invalidates sold-out answers still in flight. It
// runs after the wrapped call returns, whatever it returned: the call may
// have changed the stock even when it reports an error.
func (g *Marks) clear(v domain.VoucherID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.clears.Add(1)
	// A probe in flight keeps its own pointer and finds it gone when it settles.
	if m := g.marks[v]; m != nil {
		g.remove(v, m)
	}
}

// Preheat (over)writes the voucher's stock, so its mark goes.
func (g *Gate) Preheat(ctx context.Context, v domain.Voucher) error {
	defer g.clear(v.ID())
	return g.next.Preheat(ctx, v)
}

// Restore may write stock the gate lacked, so the voucher's mark goes.
func (g *Gate) Restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) (bool, error) {
	defer g.clear(v.ID())
	return g.next.Restore(ctx, v, buyers)
}

// Release may return a unit to stock, so the voucher's mark goes.
func (g *Gate) Release(ctx context.Context, o domain.VoucherOrder, restoreStock bool) error {
	defer g.clear(o.VoucherID())
	return g.next.Release(ctx, o, restoreStock)
}

// Return gives units back, so the marks of the orders' vouchers go.
func (g *Gate) Return(ctx context.Context, orders []domain.VoucherOrder) error {
	defer func() {
		for _, o := range orders {
			g.clear(o.VoucherID())
		}
	}()
	return g.next.Return(ctx, orders)
}

// Reserve is the wrapped gate's: marks are set by the Admission, which sees
// every claim whatever the driver.
func (g *Gate) Reserve(ctx context.Context, o domain.VoucherOrder) error {
	return g.next.Reserve(ctx, o)
}

// Queued reads the gate's buyers, which a mark says nothing about.
func (g *Gate) Queued(ctx context.Context, user domain.UserID, id domain.OrderID) (domain.VoucherOrder, bool, error) {
	return g.next.Queued(ctx, user, id)
}
