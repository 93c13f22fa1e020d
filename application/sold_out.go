package application

import (
	"cmp"
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

// SoldOutMarks answers sold out for a window after the gate did, then lets one
// claim per voucher re-check while the others wait. SoldOutGate clears a mark
// when stock may return here; a return elsewhere is seen a window later at most.
type SoldOutMarks struct {
	window time.Duration
	clock  ports.Clock
	// clears counts every clear: a claim marks only if none happened since it
	// asked the gate, or a unit Released meanwhile would be hidden for a window.
	clears atomic.Uint64
	base   time.Time // expiries are monotonic time since base
	mu     sync.Mutex
	// marks is copied on write under mu, so SoldOut reads it without the lock.
	marks atomic.Pointer[map[domain.VoucherID]*mark]
}

const (
	DefaultSoldOutWindow = 500 * time.Millisecond
	MaxSoldOutWindow     = 10 * time.Second // bounds how stale a sold-out answer may be
)

type mark struct {
	until atomic.Int64  // since base; written under mu; 0 once removed
	probe chan struct{} // non-nil while one claim re-checks; closed when settled
}

// NewSoldOutMarks keeps marks for window (0: DefaultSoldOutWindow) by clock
// (nil: the system clock); it panics on a window outside (0, MaxSoldOutWindow].
func NewSoldOutMarks(window time.Duration, clock ports.Clock) *SoldOutMarks {
	window = cmp.Or(window, DefaultSoldOutWindow)
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

// SoldOut reports, without I/O or lock, whether v has a fresh mark.
func (g *SoldOutMarks) SoldOut(v domain.VoucherID) bool {
	m := (*g.marks.Load())[v]
	return m != nil && g.fresh(m)
}

// soldOutProbe: the clears a claim started from, and the expired mark it re-checks (nil: none).
type soldOutProbe struct {
	epoch uint64
	m     *mark
}

// check is domain.ErrSoldOut from a fresh mark, or ctx.Err() while waiting for
// another claim's re-check; otherwise the claim must settle the probe.
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

// settle: a re-check's sold-out renews the mark, another answer from the gate
// removes it, and an infrastructure error leaves it expired for the next claim.
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

func (g *SoldOutMarks) mark(v domain.VoucherID, epoch uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.clears.Load() != epoch {
		return
	}
	m := (*g.marks.Load())[v]
	if m == nil {
		m = &mark{}
		defer g.set(v, m) // published once until is set
	}
	m.until.Store(g.now() + int64(g.window))
}

// clear also invalidates sold-out answers and probes in flight.
func (g *SoldOutMarks) clear(v domain.VoucherID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.clears.Add(1)
	if m := (*g.marks.Load())[v]; m != nil {
		g.remove(v, m)
	}
}

// set publishes a copy of the marks with v's mark m (nil: none); g.mu held.
func (g *SoldOutMarks) set(v domain.VoucherID, m *mark) {
	marks := maps.Clone(*g.marks.Load())
	if m == nil {
		delete(marks, v)
	} else {
		marks[v] = m
	}
	g.marks.Store(&marks)
}

func (g *SoldOutMarks) now() int64 { return int64(g.clock.Now().Sub(g.base)) }

func (g *SoldOutMarks) fresh(m *mark) bool { return g.now() < m.until.Load() }

// remove: g.mu held.
func (g *SoldOutMarks) remove(v domain.VoucherID, m *mark) {
	m.until.Store(0)
	g.set(v, nil)
}

// SoldOutGate is the StockGate whose calls that may return stock clear the
// voucher's mark once they return, even with an error.
type SoldOutGate struct {
	ports.StockGate
	marks *SoldOutMarks
}

// Gate makes next's calls that may return stock clear the marks.
func (g *SoldOutMarks) Gate(next ports.StockGate) *SoldOutGate {
	mustHave("SoldOutGate", "gate", next)
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
