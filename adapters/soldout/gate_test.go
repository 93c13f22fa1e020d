package soldout_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/soldout"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var saleStart = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)

// clock is a settable clock shared by the fake gate and the decorator.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// counting is the memory gate with its Reserve calls counted, and a hook that
// runs before each, so tests can hold a call in flight.
type counting struct {
	*memory.Gate
	reserves atomic.Int64
	before   func()
	fail     atomic.Pointer[error]
}

func (c *counting) Reserve(ctx context.Context, o domain.VoucherOrder) error {
	c.reserves.Add(1)
	if c.before != nil {
		c.before()
	}
	if err := c.fail.Load(); err != nil {
		return *err
	}
	return c.Gate.Reserve(ctx, o)
}

// reserving admits by reserving in the gate it holds: the smallest admission,
// so these tests see exactly what the marks do.
type reserving struct{ gate ports.StockGate }

func (r reserving) Admit(ctx context.Context, o domain.VoucherOrder) error {
	return r.gate.Reserve(ctx, o)
}

const window = 500 * time.Millisecond

type fixture struct {
	clock *clock
	inner *counting
	gate  *soldout.Gate      // clears marks on Preheat, Restore, Release
	adm   *soldout.Admission // answers from the marks
	v     domain.Voucher
}

func newMarked(c *clock, inner *counting, window time.Duration) *fixture {
	m := soldout.New(soldout.Options{Window: window, Clock: c})
	return &fixture{clock: c, inner: inner, gate: m.Gate(inner), adm: m.Admission(reserving{inner})}
}

func newFixture(t *testing.T, stock int) *fixture {
	t.Helper()
	c := &clock{t: saleStart.Add(time.Minute)}
	inner := &counting{Gate: memory.NewGate(c)}
	f := newMarked(c, inner, window)
	f.v = f.voucher(t, 1, stock)
	if err := f.gate.Preheat(context.Background(), f.v); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) voucher(t testing.TB, id domain.VoucherID, stock int) domain.Voucher {
	t.Helper()
	sale, err := domain.NewSale(stock, saleStart, saleStart.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "t", PayValue: 1, ActualValue: 2}, sale)
	if err != nil {
		t.Fatal(err)
	}
	return v.WithID(id)
}

func order(t testing.TB, id int64, user int64, v domain.VoucherID) domain.VoucherOrder {
	t.Helper()
	o, err := domain.NewVoucherOrder(domain.OrderID(id), domain.UserID(user), v)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (f *fixture) claim(t *testing.T, user int64) error {
	t.Helper()
	err := f.adm.Admit(context.Background(), order(t, 1000+user, user, f.v.ID()))
	return err
}

func TestMarkAnswersSoldOutWithoutAskingTheGate(t *testing.T) {
	f := newFixture(t, 1)
	if err := f.claim(t, 1); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	for u := int64(2); u <= 11; u++ {
		if err := f.claim(t, u); !errors.Is(err, domain.ErrSoldOut) {
			t.Fatalf("user %d: %v, want sold out", u, err)
		}
	}
	// One success and the sold-out answer that set the mark; the other nine
	// were answered from it.
	if got := f.inner.reserves.Load(); got != 2 {
		t.Fatalf("gate asked %d times, want 2", got)
	}
	if got := f.gate.Saved(); got != 9 {
		t.Fatalf("Saved = %d, want 9", got)
	}
}

func TestMarkExpiresAfterTheWindow(t *testing.T) {
	cases := []struct {
		name    string
		advance time.Duration
		asks    int64 // gate calls by the claim made after advancing
	}{
		{"just_before_the_window", window - time.Nanosecond, 0},
		{"at_the_window", window, 1},
		{"long_after", 10 * window, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 1)
			_ = f.claim(t, 1)
			_ = f.claim(t, 2) // marks
			before := f.inner.reserves.Load()
			f.clock.Advance(tc.advance)
			if err := f.claim(t, 3); !errors.Is(err, domain.ErrSoldOut) {
				t.Fatalf("claim: %v, want sold out", err)
			}
			if got := f.inner.reserves.Load() - before; got != tc.asks {
				t.Fatalf("gate asked %d times, want %d", got, tc.asks)
			}
			// A re-check that finds it sold out again renews the mark.
			_ = f.claim(t, 4)
			if got := f.inner.reserves.Load() - before; got != tc.asks {
				t.Fatalf("after renewal the gate was asked %d times, want %d", got, tc.asks)
			}
		})
	}
}

func TestLocalStockChangesClearTheMark(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, f *fixture)
	}{
		{"release_returning_stock", func(t *testing.T, f *fixture) {
			if err := f.gate.Release(context.Background(), order(t, 1001, 1, f.v.ID()), true); err != nil {
				t.Fatal(err)
			}
		}},
		{"preheat_of_a_gate_redis_lost", func(t *testing.T, f *fixture) {
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
			f := newFixture(t, 1)
			_ = f.claim(t, 1)
			if err := f.claim(t, 2); !errors.Is(err, domain.ErrSoldOut) {
				t.Fatalf("claim: %v, want sold out", err)
			}
			tc.change(t, f)
			if err := f.claim(t, 3); err != nil {
				t.Fatalf("claim after the change: %v, want success (no clock moved)", err)
			}
		})
	}
}

// Restore writes stock only when the gate lacks the voucher, but whatever it
// did, the next claim must ask the gate again.
func TestRestoreClearsTheMark(t *testing.T) {
	f := newFixture(t, 1)
	_ = f.claim(t, 1)
	_ = f.claim(t, 2)
	if _, err := f.gate.Restore(context.Background(), f.v, nil); err != nil {
		t.Fatal(err)
	}
	before := f.inner.reserves.Load()
	if err := f.claim(t, 3); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("claim: %v, want sold out", err)
	}
	if got := f.inner.reserves.Load() - before; got != 1 {
		t.Fatalf("gate asked %d times after Restore, want 1", got)
	}
}

// Stock returned behind the decorator's back (another instance's Release)
// may be hidden for at most the window, never longer.
func TestStockReturnedElsewhereIsOfferedAgainAfterTheWindow(t *testing.T) {
	f := newFixture(t, 1)
	_ = f.claim(t, 1)
	_ = f.claim(t, 2)
	if err := f.inner.Gate.Release(context.Background(), order(t, 1001, 1, f.v.ID()), true); err != nil {
		t.Fatal(err)
	}
	if err := f.claim(t, 3); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("within the window: %v, want the stale sold out", err)
	}
	f.clock.Advance(window)
	if err := f.claim(t, 3); err != nil {
		t.Fatalf("after the window: %v, want success", err)
	}
}

// A sold-out answer computed before a Release returned stock must not mark
// the voucher after that Release: it would hide the unit for a window.
func TestSoldOutInFlightDuringReleaseDoesNotMark(t *testing.T) {
	f := newFixture(t, 1)
	_ = f.claim(t, 1)

	entered, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.inner.before = func() {
		once.Do(func() {
			close(entered)
			<-proceed
		})
	}
	// The gate decided "sold out" before the release below landed.
	var soldOut error = domain.ErrSoldOut
	f.inner.fail.Store(&soldOut)
	done := make(chan error)
	go func() {
		err := f.adm.Admit(context.Background(), order(t, 1002, 2, f.v.ID()))
		done <- err
	}()
	<-entered
	if err := f.gate.Release(context.Background(), order(t, 1001, 1, f.v.ID()), true); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	if err := <-done; !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("in-flight claim: %v, want sold out", err)
	}
	f.inner.fail.Store(nil)
	if err := f.claim(t, 3); err != nil {
		t.Fatalf("claim after the release: %v, want success", err)
	}
}

// When the window has passed, one request re-checks; the others wait for its
// answer instead of all asking the gate, and share it.
func TestOneRequestRechecksAnExpiredMark(t *testing.T) {
	f := newFixture(t, 1)
	_ = f.claim(t, 1)
	_ = f.claim(t, 2)
	f.clock.Advance(window)
	base := f.inner.reserves.Load()

	entered, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.inner.before = func() {
		once.Do(func() {
			close(entered)
			<-proceed
		})
	}
	const n = 50
	errs := make(chan error, n)
	go func() {
		err := f.adm.Admit(context.Background(), order(t, 2000, 2000, f.v.ID()))
		errs <- err
	}()
	<-entered
	var started sync.WaitGroup
	for i := 1; i < n; i++ {
		started.Add(1)
		go func(i int) {
			started.Done()
			err := f.adm.Admit(context.Background(), order(t, int64(2000+i), int64(2000+i), f.v.ID()))
			errs <- err
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
	f := newFixture(t, 1)
	_ = f.claim(t, 1)
	_ = f.claim(t, 2)
	f.clock.Advance(window)
	down := errors.New("redis: connection refused")
	f.inner.fail.Store(&down)
	if err := f.claim(t, 3); !errors.Is(err, down) {
		t.Fatalf("claim during the outage: %v, want the gate's error", err)
	}
	f.inner.fail.Store(nil)
	base := f.inner.reserves.Load()
	if err := f.claim(t, 4); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("claim: %v, want sold out", err)
	}
	if got := f.inner.reserves.Load() - base; got != 1 {
		t.Fatalf("gate asked %d times, want 1 (the next request re-checks)", got)
	}
}

func TestOtherAnswersOfARecheckClearTheMark(t *testing.T) {
	f := newFixture(t, 2)
	_ = f.claim(t, 1)
	_ = f.claim(t, 2)
	if err := f.claim(t, 3); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("claim: %v, want sold out", err)
	}
	// Another instance gives user 2's unit back; then user 1, who holds an
	// order, re-checks. The gate checks stock before duplicates, so its
	// "already claimed" means stock is there: the mark must go.
	if err := f.inner.Gate.Release(context.Background(), order(t, 1002, 2, f.v.ID()), true); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(window)
	// A new claim of user 1 (a new order id: the same id would be the
	// first claim resent, which the gate answers taken).
	if err := f.adm.Admit(context.Background(), order(t, 2001, 1, f.v.ID())); !errors.Is(err, domain.ErrAlreadyClaimed) {
		t.Fatalf("re-check by a holder: %v, want already claimed", err)
	}
	if err := f.claim(t, 4); err != nil {
		t.Fatalf("claim after the re-check found stock: %v, want success", err)
	}
}

// The start-gate race through the decorator: the mark must never let the
// gate sell more, or refuse a unit that is there once the window is past.
func TestStampedeThroughTheMark(t *testing.T) {
	const (
		stock   = 25
		users   = 400
		perUser = 3
	)
	f := newFixture(t, stock)
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
				o := order(t, int64(u*10+r), int64(u), f.v.ID())
				err := f.adm.Admit(context.Background(), o)
				switch {
				case err == nil:
					wins.Add(1)
					// Some winners give their unit back (a full queue's
					// rollback), racing the others' claims.
					if u%10 == 0 {
						if err := f.gate.Release(context.Background(), o, true); err != nil {
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
	f.clock.Advance(window)
	for u := int64(users + 1); left > 0; u++ {
		if err := f.claim(t, u); err != nil {
			t.Fatalf("claim with %d left after the window: %v", left, err)
		}
		left--
	}
}

func TestNewRefusesWiringMistakes(t *testing.T) {
	cases := []struct {
		name  string
		build func()
	}{
		{"nil_gate", func() { soldout.New(soldout.Options{}).Gate(nil) }},
		{"nil_admission", func() { soldout.New(soldout.Options{}).Admission(nil) }},
		{"negative_window", func() { soldout.New(soldout.Options{Window: -time.Second}) }},
		{"window_too_long", func() { soldout.New(soldout.Options{Window: time.Hour}) }},
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
	if w := soldout.New(soldout.Options{}).Window(); w != soldout.DefaultWindow {
		t.Fatalf("default window %s, want %s", w, soldout.DefaultWindow)
	}
}

// TestSoldOutSignalFollowsTheMark: the lock-free check the sold-out edge
// makes on every request answers as the admission would: no before the
// voucher sold out, yes from the mark (counted as saved), no once the
// window passed, yes again once a re-check renewed it, and no the moment a
// local Release cleared it, without the clock moving.
func TestSoldOutSignalFollowsTheMark(t *testing.T) {
	f := newFixture(t, 1)
	v := f.v.ID()
	if f.adm.SoldOut(v) {
		t.Fatal("sold out before any claim")
	}
	_ = f.claim(t, 1)
	if f.adm.SoldOut(v) {
		t.Fatal("sold out before the gate said so")
	}
	if err := f.claim(t, 2); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("claim: %v, want sold out", err)
	}
	saved := f.gate.Saved()
	if !f.adm.SoldOut(v) || !f.adm.SoldOut(v) {
		t.Fatal("not sold out from a fresh mark")
	}
	if got := f.gate.Saved(); got != saved+2 {
		t.Fatalf("Saved = %d after two answers from the mark, want %d", got, saved+2)
	}
	if f.adm.SoldOut(v + 1) {
		t.Fatal("another voucher is sold out")
	}
	f.clock.Advance(window)
	if f.adm.SoldOut(v) {
		t.Fatal("sold out from an expired mark")
	}
	if err := f.claim(t, 3); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("re-check: %v, want sold out", err)
	}
	if !f.adm.SoldOut(v) {
		t.Fatal("not sold out after the re-check renewed the mark")
	}
	if err := f.gate.Release(context.Background(), order(t, 1001, 1, v), true); err != nil {
		t.Fatal(err)
	}
	if f.adm.SoldOut(v) {
		t.Fatal("sold out after a Release cleared the mark")
	}
	if err := f.claim(t, 4); err != nil {
		t.Fatalf("claim after the release: %v, want success", err)
	}
}
