package testenv

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
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
// It is moved by SECKILL_TEST_CLOCK_OFFSET as the Redis it is checked
// against is (see Now).
type WallClock struct{}

var _ ports.Clock = WallClock{}

func (WallClock) Now() time.Time { return time.Now().Add(ClockOffset()) }

// ClockOffsetEnv moves the tests' present: .ci/year-on.sh runs the suites
// that reach Redis with it set to a year and against a Redis whose own clock
// runs a year ahead (faketime), the way every test will run a year from now.
// A test that fixed a date instead of taking it from Now fails that run
// today, not next year.
const ClockOffsetEnv = "SECKILL_TEST_CLOCK_OFFSET"

var clockOffset = sync.OnceValue(func() time.Duration {
	v := os.Getenv(ClockOffsetEnv)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", ClockOffsetEnv, v, err))
	}
	return d
})

// ClockOffset is how far SECKILL_TEST_CLOCK_OFFSET moves the tests' present
// (zero when unset).
func ClockOffset() time.Duration { return clockOffset() }

// Now is the present a test places its sales, orders and deadlines around,
// whole seconds in UTC so that every store keeps it exactly. A test whose
// times reach a real Redis, MySQL or a TTL takes them from here (or runs a
// fake clock end to end): a fixed date passes on the day it was written and
// fails once the backends' clocks have moved past it.
func Now() time.Time { return time.Now().Add(ClockOffset()).UTC().Truncate(time.Second) }

// SkipOwnClock skips a test whose backend runs on the machine's clock (a
// redis-server it starts itself) when SECKILL_TEST_CLOCK_OFFSET moves the
// tests' present: that server cannot be moved with it (libfaketime and
// Redis's jemalloc clash), so the test would compare times a year apart.
func SkipOwnClock(t testing.TB) {
	t.Helper()
	if ClockOffset() != 0 {
		t.Skipf("its Redis runs on the machine's clock, which %s does not move", ClockOffsetEnv)
	}
}
