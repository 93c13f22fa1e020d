package application_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The claim's sold-out step (application.SoldOutMarks), through the claim
// itself, over the memory gate.

const markWindow = 500 * time.Millisecond

// countedGate is the memory gate with its Reserve calls counted, and a hook
// that runs before each, so tests can hold a call in flight.
type countedGate struct {
	*memory.Gate
	reserves atomic.Int64
	before   func()
	fail     atomic.Pointer[error]
}

func (c *countedGate) Reserve(ctx context.Context, o domain.VoucherOrder) error {
	c.reserves.Add(1)
	if c.before != nil {
		c.before()
	}
	if err := c.fail.Load(); err != nil {
		return *err
	}
	return c.Gate.Reserve(ctx, o)
}

// answersTold is a ClaimRecorder: what the claim told it.
type answersTold struct {
	mu       sync.Mutex
	outcomes map[string]int
	fromMark int
}

func (a *answersTold) ClaimAnswered(_ domain.VoucherID, err error, fromMark bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.outcomes == nil {
		a.outcomes = map[string]int{}
	}
	outcome := "success"
	var r *domain.Refusal
	switch {
	case errors.As(err, &r):
		outcome = r.Code()
	case err != nil:
		outcome = "error"
	}
	a.outcomes[outcome]++
	if fromMark {
		a.fromMark++
	}
}

func (a *answersTold) saved() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fromMark
}

func (a *answersTold) count(outcome string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.outcomes[outcome]
}

type markFixture struct {
	clock *testenv.Clock
	inner *countedGate
	gate  *application.SoldOutGate // clears marks on Preheat, Restore, Release, Return
	claim *application.ClaimSeckill
	told  *answersTold
	v     domain.Voucher
	// orders are the orders taken, by user.
	mu     sync.Mutex
	orders map[domain.UserID]domain.VoucherOrder
}

func newMarkFixture(t *testing.T, stock int) *markFixture {
	t.Helper()
	clock := testenv.NewClock(now)
	inner := &countedGate{Gate: memory.NewGate(clock)}
	marks := application.NewSoldOutMarks(markWindow, clock)
	f := &markFixture{clock: clock, inner: inner, gate: marks.Gate(inner), told: &answersTold{},
		orders: map[domain.UserID]domain.VoucherOrder{}}
	// The smallest admission, reserving through the marked gate, so these
	// tests see exactly what the marks do.
	f.claim = application.NewClaimSeckill(memory.NewIDs(clock), reserveOnly{f.gate}).WithSoldOutMarks(marks).WithRecorder(f.told)
	f.v = seckillVoucher(t, stock).WithID(1)
	if err := f.gate.Preheat(context.Background(), f.v); err != nil {
		t.Fatal(err)
	}
	return f
}

// take is user's claim; an order taken is kept for the test to release.
func (f *markFixture) take(user int64) error {
	id, err := f.claim.Handle(context.Background(), domain.UserID(user), f.v.ID())
	if err == nil {
		o, oerr := domain.NewVoucherOrder(id, domain.UserID(user), f.v.ID())
		if oerr != nil {
			return oerr
		}
		f.mu.Lock()
		f.orders[domain.UserID(user)] = o
		f.mu.Unlock()
	}
	return err
}

// wantSoldOut is user's claim, which must be answered sold out after asking
// the gate asks times.
func (f *markFixture) wantSoldOut(t *testing.T, user, asks int64) {
	t.Helper()
	before := f.inner.reserves.Load()
	if err := f.take(user); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("user %d's claim: %v, want sold out", user, err)
	}
	if got := f.inner.reserves.Load() - before; got != asks {
		t.Fatalf("user %d's claim asked the gate %d times, want %d", user, got, asks)
	}
}

// holdFirstReserve holds the gate's next Reserve in flight: entered is
// closed when it is held, and it goes on once the test closes proceed.
func (f *markFixture) holdFirstReserve() (entered, proceed chan struct{}) {
	entered, proceed = make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.inner.before = func() {
		once.Do(func() {
			close(entered)
			<-proceed
		})
	}
	return entered, proceed
}

func (f *markFixture) order(user int64) domain.VoucherOrder {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.orders[domain.UserID(user)]
}

func TestMarkAnswersSoldOutWithoutAskingTheGate(t *testing.T) {
	f := newMarkFixture(t, 1)
	if err := f.take(1); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	for u := int64(2); u <= 11; u++ {
		if err := f.take(u); !errors.Is(err, domain.ErrSoldOut) {
			t.Fatalf("user %d: %v, want sold out", u, err)
		}
	}
	// One success and the sold-out answer that set the mark; the other nine
	// were answered from it.
	if got := f.inner.reserves.Load(); got != 2 {
		t.Fatalf("gate asked %d times, want 2", got)
	}
	if got := f.told.saved(); got != 9 {
		t.Fatalf("%d answers from the mark, want 9", got)
	}
}

// Every claim's answer is told to the recorder once, whichever step gave
// it, and the edge's pre-check (SoldOut) tells its yeses as claims answered.
func TestEveryAnswerIsRecordedOnce(t *testing.T) {
	f := newMarkFixture(t, 2)
	_ = f.take(1) // success
	_ = f.take(1) // duplicate
	_ = f.take(2) // success
	_ = f.take(3) // sold out, from the gate
	_ = f.take(4) // sold out, from the mark
	if !f.claim.SoldOut(f.v.ID()) || f.claim.SoldOut(f.v.ID()+1) {
		t.Fatal("the pre-check does not follow the mark")
	}
	want := map[string]int{"success": 2, "duplicate": 1, "sold_out": 3, "error": 0}
	for outcome, n := range want {
		if got := f.told.count(outcome); got != n {
			t.Fatalf("%s told %d times, want %d", outcome, got, n)
		}
	}
	if got := f.told.saved(); got != 2 {
		t.Fatalf("%d answers from the mark, want 2", got)
	}
}

func TestMarkExpiresAfterTheWindow(t *testing.T) {
	cases := []struct {
		name    string
		advance time.Duration
		asks    int64 // gate calls by the claim made after advancing
	}{
		{"just_before_the_window", markWindow - time.Nanosecond, 0},
		{"at_the_window", markWindow, 1},
		{"long_after", 10 * markWindow, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newMarkFixture(t, 1)
			_ = f.take(1)
			_ = f.take(2) // marks
			f.clock.Advance(tc.advance)
			f.wantSoldOut(t, 3, tc.asks)
			// A re-check that finds it sold out again renews the mark.
			f.wantSoldOut(t, 4, 0)
		})
	}
}

func TestLocalStockChangesClearTheMark(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, f *markFixture)
	}{
		{"release_returning_stock", func(t *testing.T, f *markFixture) {
			if err := f.gate.Release(context.Background(), f.order(1), true); err != nil {
				t.Fatal(err)
			}
		}},
		{"return_of_a_cancelled_order", func(t *testing.T, f *markFixture) {
			if err := f.gate.Return(context.Background(), []domain.VoucherOrder{f.order(1)}); err != nil {
				t.Fatal(err)
			}
		}},
		{"preheat_of_a_gate_redis_lost", func(t *testing.T, f *markFixture) {
			// Preheat never refills a gate that holds claims; it writes one
			// the store lost, and that must clear the local mark too.
			f.inner.Forget(f.v.ID())
			if err := f.gate.Preheat(context.Background(), f.v); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newMarkFixture(t, 1)
			_ = f.take(1)
			if err := f.take(2); !errors.Is(err, domain.ErrSoldOut) {
				t.Fatalf("claim: %v, want sold out", err)
			}
			tc.change(t, f)
			if err := f.take(3); err != nil {
				t.Fatalf("claim after the change: %v, want success (no clock moved)", err)
			}
		})
	}
}

// Restore writes stock only when the gate lacks the voucher, but whatever it
// did, the next claim must ask the gate again.
func TestRestoreClearsTheMark(t *testing.T) {
	f := newMarkFixture(t, 1)
	_ = f.take(1)
	f.wantSoldOut(t, 2, 1)
	if _, err := f.gate.Restore(context.Background(), f.v, nil); err != nil {
		t.Fatal(err)
	}
	f.wantSoldOut(t, 3, 1)
}

// Stock returned behind the marked gate's back (another instance's
// Release) may be hidden for at most the window, never longer.
func TestStockReturnedElsewhereIsOfferedAgainAfterTheWindow(t *testing.T) {
	f := newMarkFixture(t, 1)
	_ = f.take(1)
	_ = f.take(2)
	if err := f.inner.Gate.Release(context.Background(), f.order(1), true); err != nil {
		t.Fatal(err)
	}
	if err := f.take(3); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("within the window: %v, want the stale sold out", err)
	}
	f.clock.Advance(markWindow)
	if err := f.take(3); err != nil {
		t.Fatalf("after the window: %v, want success", err)
	}
}

// A sold-out answer computed before a Release returned stock must not mark
// the voucher after that Release: it would hide the unit for a window.
func TestSoldOutInFlightDuringReleaseDoesNotMark(t *testing.T) {
	f := newMarkFixture(t, 1)
	_ = f.take(1)

	entered, proceed := f.holdFirstReserve()
	// The gate decided "sold out" before the release below landed.
	var soldOut error = domain.ErrSoldOut
	f.inner.fail.Store(&soldOut)
	done := make(chan error)
	go func() { done <- f.take(2) }()
	<-entered
	if err := f.gate.Release(context.Background(), f.order(1), true); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	if err := <-done; !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("in-flight claim: %v, want sold out", err)
	}
	f.inner.fail.Store(nil)
	if err := f.take(3); err != nil {
		t.Fatalf("claim after the release: %v, want success", err)
	}
}

// When the window has passed, one claim re-checks; the others wait for its
// answer instead of all asking the gate, and share it.
func TestOneRequestRechecksAnExpiredMark(t *testing.T) {
	f := newMarkFixture(t, 1)
	_ = f.take(1)
	_ = f.take(2)
	f.clock.Advance(markWindow)
	base := f.inner.reserves.Load()

	entered, proceed := f.holdFirstReserve()
	const n = 50
	errs := make(chan error, n)
	go func() { errs <- f.take(2000) }()
	<-entered
	var started sync.WaitGroup
	for i := 1; i < n; i++ {
		started.Add(1)
		go func(i int) {
			started.Done()
			errs <- f.take(int64(2000 + i))
		}(i)
	}
	started.Wait()
	close(proceed)
	for i := 0; i < n; i++ {
		if err := <-errs; !errors.Is(err, domain.ErrSoldOut) {
			t.Fatalf("claim: %v, want sold out", err)
		}
	}
	// The goroutines that had not reached the mark before the probe settled
	// found it renewed; either way only the probe asked.
	if got := f.inner.reserves.Load() - base; got != 1 {
		t.Fatalf("gate asked %d times for %d claims, want 1", got, n)
	}
}

func TestAFailedRecheckLeavesTheNextRequestToRecheck(t *testing.T) {
	f := newMarkFixture(t, 1)
	_ = f.take(1)
	_ = f.take(2)
	f.clock.Advance(markWindow)
	down := errors.New("redis: connection refused")
	f.inner.fail.Store(&down)
	if err := f.take(3); !errors.Is(err, down) {
		t.Fatalf("claim during the outage: %v, want the gate's error", err)
	}
	f.inner.fail.Store(nil)
	f.wantSoldOut(t, 4, 1) // the next claim re-checks
}

func TestOtherAnswersOfARecheckClearTheMark(t *testing.T) {
	f := newMarkFixture(t, 2)
	_ = f.take(1)
	_ = f.take(2)
	if err := f.take(3); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("claim: %v, want sold out", err)
	}
	// Another instance gives user 2's unit back; then user 1, who holds an
	// order, re-checks. The gate checks stock before duplicates, so its
	// "already claimed" means stock is there: the mark must go.
	if err := f.inner.Gate.Release(context.Background(), f.order(2), true); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(markWindow)
	if err := f.take(1); !errors.Is(err, domain.ErrAlreadyClaimed) {
		t.Fatalf("re-check by a holder: %v, want already claimed", err)
	}
	if err := f.take(4); err != nil {
		t.Fatalf("claim after the re-check found stock: %v, want success", err)
	}
}

// The start-gate race through the marks: they must never let the gate sell
// more, or refuse a unit that is there once the window is past.
func TestStampedeThroughTheMark(t *testing.T) {
	const (
		stock   = 25
		users   = 400
		perUser = 3
	)
	f := newMarkFixture(t, stock)
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		wins     atomic.Int64
		soldOut  atomic.Int64
		dup      atomic.Int64
		released atomic.Int64
	)
	for u := 1; u <= users; u++ {
		for r := 0; r < perUser; r++ {
			wg.Add(1)
			go func(u, r int) {
				defer wg.Done()
				<-start
				err := f.take(int64(u))
				switch {
				case err == nil:
					wins.Add(1)
					// Some winners give their unit back (a full queue's
					// rollback), racing the others' claims.
					if u%10 == 0 {
						if err := f.gate.Release(context.Background(), f.order(int64(u)), true); err != nil {
							t.Error(err)
						}
						released.Add(1)
					}
				case errors.Is(err, domain.ErrSoldOut):
					soldOut.Add(1)
				case errors.Is(err, domain.ErrAlreadyClaimed):
					dup.Add(1)
				default:
					t.Errorf("claim: %v", err)
				}
				if r == 0 {
					f.clock.Advance(time.Millisecond)
				}
			}(u, r)
		}
	}
	close(start)
	wg.Wait()
	left, _, _ := f.inner.Stock(context.Background(), f.v.ID())
	if held := wins.Load() - released.Load(); held+int64(left) != stock {
		t.Fatalf("%d held + %d left != stock %d", held, left, stock)
	}
	if total := wins.Load() + soldOut.Load() + dup.Load(); total != users*perUser {
		t.Fatalf("%d answers for %d claims", total, users*perUser)
	}
	// Whatever stock the releases left, a claim past the window gets it.
	f.clock.Advance(markWindow)
	for u := int64(users + 1); left > 0; u++ {
		if err := f.take(u); err != nil {
			t.Fatalf("claim with %d left after the window: %v", left, err)
		}
		left--
	}
}

func TestSoldOutMarksRefuseWiringMistakes(t *testing.T) {
	cases := []struct {
		name  string
		build func()
	}{
		{"nil_gate", func() { application.NewSoldOutMarks(0, nil).Gate(nil) }},
		{"negative_window", func() { application.NewSoldOutMarks(-time.Second, nil) }},
		{"window_too_long", func() { application.NewSoldOutMarks(time.Hour, nil) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("did not panic")
				}
			}()
			tc.build()
		})
	}
	if w := application.NewSoldOutMarks(0, nil).Window(); w != application.DefaultSoldOutWindow {
		t.Fatalf("default window %s, want %s", w, application.DefaultSoldOutWindow)
	}
}

// TestSoldOutSignalFollowsTheMark: the lock-free pre-check the sold-out
// edge makes on every request (ClaimSeckill.SoldOut) answers as the claim
// would: no before the voucher sold out, yes from the mark (recorded as an
// answer from it), no once the window passed, yes again once a re-check
// renewed it, and no the moment a local Release cleared it, without the
// clock moving.
func TestSoldOutSignalFollowsTheMark(t *testing.T) {
	f := newMarkFixture(t, 1)
	v := f.v.ID()
	if f.claim.SoldOut(v) {
		t.Fatal("sold out before any claim")
	}
	_ = f.take(1)
	if f.claim.SoldOut(v) {
		t.Fatal("sold out before the gate said so")
	}
	if err := f.take(2); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("claim: %v, want sold out", err)
	}
	saved := f.told.saved()
	if !f.claim.SoldOut(v) || !f.claim.SoldOut(v) {
		t.Fatal("not sold out from a fresh mark")
	}
	if got := f.told.saved(); got != saved+2 {
		t.Fatalf("%d answers from the mark after two more, want %d", got, saved+2)
	}
	if f.claim.SoldOut(v + 1) {
		t.Fatal("another voucher is sold out")
	}
	f.clock.Advance(markWindow)
	if f.claim.SoldOut(v) {
		t.Fatal("sold out from an expired mark")
	}
	if err := f.take(3); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("re-check: %v, want sold out", err)
	}
	if !f.claim.SoldOut(v) {
		t.Fatal("not sold out after the re-check renewed the mark")
	}
	if err := f.gate.Release(context.Background(), f.order(1), true); err != nil {
		t.Fatal(err)
	}
	if f.claim.SoldOut(v) {
		t.Fatal("sold out after a Release cleared the mark")
	}
	if err := f.take(4); err != nil {
		t.Fatalf("claim after the release: %v, want success", err)
	}
}
