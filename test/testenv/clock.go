package testenv

import (
	"sync/atomic"
	"time"

	"github.com/hmdp-go/seckill/ports"
)

// Clock is the tests' ports.Clock: it stands still at the time it was given
// until a test sets or advances it, so windows, expiries and midnight are
// reached on purpose rather than by waiting. It is safe for concurrent use,
// since a test moves it while the code under test reads it, and reading it
// takes no lock, so benchmarks and parallel tests do not contend on it.
type Clock struct {
	now atomic.Pointer[time.Time]
}

var _ ports.Clock = (*Clock)(nil)

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock {
	c := &Clock{}
	c.now.Store(&t)
	return c
}

func (c *Clock) Now() time.Time { return *c.now.Load() }

// Set moves the clock to t, backwards too (a clock step, another instance's
// clock).
func (c *Clock) Set(t time.Time) { c.now.Store(&t) }

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	for {
		old := c.now.Load()
		t := old.Add(d)
		if c.now.CompareAndSwap(old, &t) {
			return
		}
	}
}

// WallClock reads the real time, for fakes checked against something that
// does too (the Redis gate against Redis TIME, a worker against a deadline).
type WallClock struct{}

var _ ports.Clock = WallClock{}

func (WallClock) Now() time.Time { return time.Now() }
