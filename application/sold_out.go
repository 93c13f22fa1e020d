package application

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// SoldOutMarks keeps a sold-out voucher's stampede away from Redis: once the
// admission answers sold out for a voucher, this instance answers sold out
// itself, for a short window, without asking the gate again. In a flash
// sale almost every request arrives after the stock is gone, so this turns
// most of them into an in-memory answer. The claim reads and sets the marks
// as one of its steps (ClaimSeckill.Claim); SoldOutGate clears them.
//
// The staleness bound: a sold-out answer given from a mark is based on a
// gate answer at most the window old (default DefaultSoldOutWindow). When
// the window has passed, exactly one claim per voucher re-checks the gate;
// claims that arrive while it does wait for its answer (one Redis round
// trip) and share it if it is sold out again, so they are never answered
// from an expired mark. Stock can come back (a released reservation, a
// re-preheated voucher): on this instance Preheat, Restore, Release and
// Return of a voucher clear its mark at once; a change made elsewhere
// (another instance's Release, an operator's reconcile) is seen here at the
// latest a window after it happened.
type SoldOutMarks struct {
	window time.Duration
	clock  ports.Clock

	// clears counts every clear of any voucher. A claim remembers it before
	// asking the gate and marks only if no clear happened meanwhile: its sold
	// out answer may predate a Release that returned stock, and marking then
	// would hide that unit for a whole window. One counter for all vouchers
	// (instead of one per voucher) lets unmarked vouchers leave the map; a
	// clear elsewhere costs at most one missed mark, which is one more gate
	// call.
	clears atomic.Uint64

	// base anchors the marks' expiries: they are kept as time since base,
	// read from the clock's monotonic reading, so a step of the wall clock
	// moves none.
	base time.Time

	mu sync.Mutex
	// marks is copied on write (under mu) whenever a mark is added or
	// removed, which is rare: SoldOut, the sold-out edge's check on every
	// request of a stampede, reads it without the lock, which moved its
	// cache line between the cores on every answer.
	marks atomic.Pointer[map[domain.VoucherID]*mark]
}

// DefaultSoldOutWindow keeps a mark long enough that a stampede on a sold-out
// voucher costs about two gate calls per second per instance, and short
// enough that stock returned by another instance is offered again before a
// user retrying by hand notices.
const DefaultSoldOutWindow = 500 * time.Millisecond

// MaxSoldOutWindow bounds how stale a sold-out answer may be; beyond a few
// seconds users would see "sold out" for stock that is back on sale.
const MaxSoldOutWindow = 10 * time.Second

// mark is one voucher's remembered sold-out answer.
type mark struct {
	// until is when (since SoldOutMarks.base) it stops being an answer;
	// written under SoldOutMarks.mu, read without it. 0 once the mark is
	// removed.
	until atomic.Int64
	// probe is non-nil while one claim re-checks an expired mark; it is
	// closed when that claim has settled the mark.
	probe chan struct{}
}

// NewSoldOutMarks keeps marks for window (0: DefaultSoldOutWindow) by clock
// (nil: the system clock). It panics on a window outside (0,
// MaxSoldOutWindow]: a wiring mistake that must stop the process at start.
func NewSoldOutMarks(window time.Duration, clock ports.Clock) *SoldOutMarks {
	if window == 0 {
		window = DefaultSoldOutWindow
	}
	if window < 0 || window > MaxSoldOutWindow {
		panic(fmt.Sprintf("application: the sold-out window must be within (0, %s], got %s", MaxSoldOutWindow, window))
	}
	if clock == nil {
		clock = ports.SystemClock{}
	}
	g := &SoldOutMarks{window: window, clock: clock, base: clock.Now()}
	g.marks.Store(&map[domain.VoucherID]*mark{})
	return g
}

// SoldOut reports, without any I/O or lock, whether v has a fresh mark: the
// answer the claim's sold-out step would give from it (an expired mark is
// not an answer: the claim re-checks the gate).
func (g *SoldOutMarks) SoldOut(v domain.VoucherID) bool {
	m := (*g.marks.Load())[v]
	return m != nil && g.fresh(m)
}

// soldOutProbe is what a claim that passed the sold-out step settles once
// the gate answered it: the clears it started from, and the expired mark it
// re-checks (nil when it re-checks none).
type soldOutProbe struct {
	epoch uint64
	m     *mark
}

// check is the claim's sold-out step: domain.ErrSoldOut from a fresh mark,
// or ctx.Err() if ctx ends while it waits for another claim's re-check of
// v's expired mark (see SoldOutMarks). Otherwise the claim goes on to the
// gate and must settle what check returned with the gate's answer.
func (g *SoldOutMarks) check(ctx context.Context, v domain.VoucherID) (soldOutProbe, error) {
	for {
		p := soldOutProbe{epoch: g.clears.Load()}
		g.mu.Lock()
		m := (*g.marks.Load())[v]
		switch {
		case m == nil:
			g.mu.Unlock()
			return p, nil
		case g.fresh(m):
			g.mu.Unlock()
			return p, domain.ErrSoldOut
		case m.probe == nil:
			m.probe = make(chan struct{})
			g.mu.Unlock()
			p.m = m
			return p, nil
		}
		probe := m.probe
		g.mu.Unlock()
		select {
		case <-probe:
		case <-ctx.Done():
			return p, ctx.Err()
		}
	}
}

// settle records what the gate answered a claim that passed check. Without
// a re-check, a sold-out answer (re)starts v's mark, unless a clear happened
// since the claim began. A re-check's sold-out answer renews the mark; any
// other answer from the gate (it checks window and stock before anything
// else) means stock may be there, so the mark goes; an infrastructure error
// says nothing, so the mark stays expired and the next claim re-checks.
// Either way the claims waiting on the re-check wake.
func (g *SoldOutMarks) settle(v domain.VoucherID, p soldOutProbe, err error) {
	if p.m == nil {
		if errors.Is(err, domain.ErrSoldOut) {
			g.mark(v, p.epoch)
		}
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	m := p.m
	close(m.probe)
	m.probe = nil
	if (*g.marks.Load())[v] != m {
		return // cleared meanwhile
	}
	switch {
	case g.clears.Load() != p.epoch:
		g.remove(v, m)
	case errors.Is(err, domain.ErrSoldOut):
		m.until.Store(g.now() + int64(g.window))
	case err == nil || domain.IsRefusal(err):
		g.remove(v, m)
	}
}

// mark starts (or restarts) v's mark, unless a clear happened since epoch.
func (g *SoldOutMarks) mark(v domain.VoucherID, epoch uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.clears.Load() != epoch {
		return
	}
	m := (*g.marks.Load())[v]
	if m == nil {
		m = &mark{}
		defer g.set(v, m) // published once its expiry is set
	}
	m.until.Store(g.now() + int64(g.window))
}

// clear forgets v's mark and invalidates sold-out answers still in flight.
func (g *SoldOutMarks) clear(v domain.VoucherID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.clears.Add(1)
	// A probe in flight keeps its own pointer and finds it gone when it settles.
	if m := (*g.marks.Load())[v]; m != nil {
		g.remove(v, m)
	}
}

// set publishes a copy of the marks with v's mark m (nil: without one);
// g.mu is held.
func (g *SoldOutMarks) set(v domain.VoucherID, m *mark) {
	marks := maps.Clone(*g.marks.Load())
	if m == nil {
		delete(marks, v)
	} else {
		marks[v] = m
	}
	g.marks.Store(&marks)
}

// now is the clock's time as marks keep it.
func (g *SoldOutMarks) now() int64 { return int64(g.clock.Now().Sub(g.base)) }

// fresh tells whether m is still an answer.
func (g *SoldOutMarks) fresh(m *mark) bool { return g.now() < m.until.Load() }

// remove forgets v's mark m; g.mu is held.
func (g *SoldOutMarks) remove(v domain.VoucherID, m *mark) {
	m.until.Store(0)
	g.set(v, nil)
}

// SoldOutGate is the StockGate whose calls that may return stock to a
// voucher (Preheat, Restore, Release, Return) clear its sold-out mark once
// they return, whatever they returned: the call may have changed the stock
// even when it reports an error. The claim path sets the marks; every other
// call goes to the gate unchanged.
type SoldOutGate struct {
	ports.StockGate
	marks *SoldOutMarks
}

// Gate makes next's Preheat, Restore, Release and Return clear the marks.
func (g *SoldOutMarks) Gate(next ports.StockGate) *SoldOutGate {
	mustHave("SoldOutGate", map[string]any{"gate": next})
	return &SoldOutGate{StockGate: next, marks: g}
}

func (g *SoldOutGate) Preheat(ctx context.Context, v domain.Voucher) error {
	defer g.marks.clear(v.ID())
	return g.StockGate.Preheat(ctx, v)
}

func (g *SoldOutGate) Restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) (bool, error) {
	defer g.marks.clear(v.ID())
	return g.StockGate.Restore(ctx, v, buyers)
}

func (g *SoldOutGate) Release(ctx context.Context, o domain.VoucherOrder, restoreStock bool) error {
	defer g.marks.clear(o.VoucherID())
	return g.StockGate.Release(ctx, o, restoreStock)
}

func (g *SoldOutGate) Return(ctx context.Context, orders []domain.VoucherOrder) error {
	defer func() {
		for _, o := range orders {
			g.marks.clear(o.VoucherID())
		}
	}()
	return g.StockGate.Return(ctx, orders)
}
