package contract_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisroom"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// roomBackends: the one RoomStore suite runs against the memory room and
// the Redis room on miniredis, a real Redis and the cluster.
// Each backend comes with the gate of the same store, which Config looks at.
type roomBackend struct {
	name string
	open func(t *testing.T) (ports.RoomStore, ports.StockGate)
}

func roomBackends() []roomBackend {
	out := []roomBackend{{"memory", func(*testing.T) (ports.RoomStore, ports.StockGate) {
		g := memory.NewGate(testenv.NewClock(roomBegin))
		return memory.NewRooms(g), g
	}}}
	for _, b := range testenv.Redises() {
		out = append(out, roomBackend{b.Name, func(t *testing.T) (ports.RoomStore, ports.StockGate) {
			rdb := b.Client(t)
			prefix := testenv.KeyPrefix(t)
			testenv.DropPrefix(t, rdb, prefix)
			return redisroom.New(rdb, prefix), redisgate.New(rdb, redisgate.Options{Prefix: prefix})
		}})
	}
	return out
}

func store(s ports.RoomStore, _ ports.StockGate) ports.RoomStore { return s }

var roomBegin = testenv.Now()

func roomVoucher(t *testing.T, id domain.VoucherID, stock, rate int, ttl time.Duration, margin int) domain.Voucher {
	t.Helper()
	r, err := domain.NewRoomRules(time.Minute, rate, ttl, margin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := domain.NewSale(stock, roomBegin, roomBegin.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "t"}, s.WithStoredRoom(r))
	if err != nil {
		t.Fatal(err)
	}
	return v.WithID(id)
}

func seedOf(b byte) (s [domain.RoomSeedSize]byte) {
	for i := range s {
		s[i] = b
	}
	return s
}

func TestRoomStoreContract(t *testing.T) {
	for _, b := range roomBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Run("open_is_idempotent_and_reads_back", func(t *testing.T) { roomOpen(t, store(b.open(t))) })
			t.Run("config_tells_a_sale_without_room", func(t *testing.T) { s, g := b.open(t); roomAbsent(t, s, g) })
			t.Run("joins_are_dense_and_stable", func(t *testing.T) { roomJoins(t, store(b.open(t))) })
			t.Run("draw_closes_after_the_begin_millisecond", func(t *testing.T) { roomDraw(t, store(b.open(t))) })
			t.Run("boundary_follows_rate_and_joiners", func(t *testing.T) { roomRate(t, store(b.open(t))) })
			t.Run("cap_use_and_expiry", func(t *testing.T) { roomCap(t, store(b.open(t))) })
			t.Run("a_paused_sale_admits_nobody", func(t *testing.T) { s, g := b.open(t); roomPaused(t, s, g) })
			t.Run("concurrent_joins_one_place_each", func(t *testing.T) { roomConcurrent(t, store(b.open(t))) })
		})
	}
}

func roomOpen(t *testing.T, s ports.RoomStore) {
	ctx := context.Background()
	v := roomVoucher(t, 7, 10, 50, 30*time.Second, 5)
	if _, found, err := s.Config(ctx, 7); err != nil || found != ports.RoomUnknown {
		t.Fatalf("Config before Open = %v, %v; want unknown", found, err)
	}
	for range 2 {
		if err := s.Open(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	cfg, found, err := s.Config(ctx, 7)
	ok := found == ports.RoomPresent
	want := ports.RoomConfig{Rules: v.Sale().Room(), Begin: roomBegin, End: roomBegin.Add(time.Hour), Cap: 15}
	if err != nil || !ok || cfg.Rules != want.Rules || !cfg.Begin.Equal(want.Begin) || !cfg.End.Equal(want.End) || cfg.Cap != want.Cap {
		t.Fatalf("Config = %+v, %v, %v; want %+v", cfg, ok, err, want)
	}
	// A voucher without a room opens nothing.
	plain := testenv.SeckillVoucher(t, domain.VoucherSpec{ShopID: 1, Title: "t"}, 10, roomBegin, roomBegin.Add(time.Hour)).WithID(8)
	if err := s.Open(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := s.Config(ctx, 8); found == ports.RoomPresent {
		t.Fatal("a voucher without a room has one after Open")
	}
	if _, _, err := s.Join(ctx, 8, 1, roomBegin, seedOf(1)); !errors.Is(err, domain.ErrNoRoom) {
		t.Fatalf("Join without a room = %v; want no_room", err)
	}
	if _, err := s.Advance(ctx, 8, roomBegin, seedOf(1), -1); !errors.Is(err, domain.ErrNoRoom) {
		t.Fatalf("Advance without a room = %v; want no_room", err)
	}
}

func roomAbsent(t *testing.T, s ports.RoomStore, g ports.StockGate) {
	ctx := context.Background()
	plain := testenv.SeckillVoucher(t, domain.VoucherSpec{ShopID: 1, Title: "t"}, 10, roomBegin, roomBegin.Add(time.Hour)).WithID(9)
	if _, found, err := s.Config(ctx, 9); err != nil || found != ports.RoomUnknown {
		t.Fatalf("before its gate: %v, %v; want unknown", found, err)
	}
	if err := g.Preheat(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.Config(ctx, 9); err != nil || found != ports.RoomAbsent {
		t.Fatalf("with its gate: %v, %v; want absent", found, err)
	}
}

func roomJoins(t *testing.T, s ports.RoomStore) {
	ctx := context.Background()
	if err := s.Open(ctx, roomVoucher(t, 7, 10, 50, 30*time.Second, 0)); err != nil {
		t.Fatal(err)
	}
	at := roomBegin.Add(-30 * time.Second)
	for u := domain.UserID(1); u <= 5; u++ {
		if j, _, err := s.Join(ctx, 7, u, at, seedOf(1)); err != nil || j != int64(u-1) {
			t.Fatalf("join of user %d = %d, %v; want %d", u, j, err, u-1)
		}
	}
	if j, _, err := s.Join(ctx, 7, 3, at.Add(time.Second), seedOf(1)); err != nil || j != 2 {
		t.Fatalf("user 3 joining again = %d, %v; want 2", j, err)
	}
	st, err := s.Advance(ctx, 7, at, seedOf(1), -1)
	if err != nil || st.Joined != 5 || st.Drawn || st.Boundary != 0 {
		t.Fatalf("state = %+v, %v; want 5 joined, not drawn, none admitted", st, err)
	}
}

func roomDraw(t *testing.T, s ports.RoomStore) {
	ctx := context.Background()
	if err := s.Open(ctx, roomVoucher(t, 7, 10, 50, 30*time.Second, 0)); err != nil {
		t.Fatal(err)
	}
	// Joins in the begin's own millisecond are in the draw.
	for u := domain.UserID(1); u <= 3; u++ {
		if _, drawn, err := s.Join(ctx, 7, u, roomBegin.Add(999*time.Microsecond), seedOf(1)); err != nil || drawn {
			t.Fatalf("join in the begin's millisecond: drawn %v, %v; want the draw open", drawn, err)
		}
	}
	if st, err := s.Advance(ctx, 7, roomBegin, seedOf(1), -1); err != nil || st.Drawn {
		t.Fatalf("at the begin: %+v, %v; want the draw still open", st, err)
	}
	// The first operation after it closes the draw with its seed; later
	// seeds are ignored.
	if j, _, err := s.Join(ctx, 7, 4, roomBegin.Add(time.Millisecond), seedOf(2)); err != nil || j != 3 {
		t.Fatalf("first join after the begin = %d, %v", j, err)
	}
	st, err := s.Advance(ctx, 7, roomBegin.Add(2*time.Millisecond), seedOf(3), -1)
	if err != nil || !st.Drawn || st.N != 3 || st.Seed != seedOf(2) || st.Joined != 4 {
		t.Fatalf("after the begin: %+v, %v; want drawn, n=3, the first seed, 4 joined", st, err)
	}
	// A join whose clock is before the begin, run after the close (another
	// instance's operation closed it), is told the draw is closed: its
	// index is past the draw.
	if j, drawn, err := s.Join(ctx, 7, 5, roomBegin.Add(-time.Millisecond), seedOf(1)); err != nil || j != 4 || !drawn {
		t.Fatalf("a join from before the begin run after the close: %d (drawn %v), %v; want 4, drawn", j, drawn, err)
	}
}

func roomRate(t *testing.T, s ports.RoomStore) {
	ctx := context.Background()
	if err := s.Open(ctx, roomVoucher(t, 100, 10, 10, 30*time.Second, 0).WithID(7)); err != nil {
		t.Fatal(err)
	}
	for u := domain.UserID(1); u <= 5; u++ {
		if _, _, err := s.Join(ctx, 7, u, roomBegin.Add(-time.Second), seedOf(1)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Advance(ctx, 7, roomBegin.Add(300*time.Millisecond), seedOf(1), -1)
	if err != nil || st.Boundary != 3 || len(st.Steps) != 1 || st.Steps[0].Boundary != 3 ||
		!st.Steps[0].At.Equal(roomBegin.Add(300*time.Millisecond)) {
		t.Fatalf("at +300ms: %+v, %v; want 3 admitted in one step", st, err)
	}
	// Never past the joiners; steps come back above the boundary asked.
	st, err = s.Advance(ctx, 7, roomBegin.Add(2*time.Second), seedOf(1), 3)
	if err != nil || st.Boundary != 5 || len(st.Steps) != 1 || st.Steps[0].Boundary != 5 {
		t.Fatalf("at +2s: %+v, %v; want 5 admitted (all joiners), one new step", st, err)
	}
	st, err = s.Advance(ctx, 7, roomBegin.Add(2*time.Second), seedOf(1), -1)
	if err != nil || len(st.Steps) != 2 {
		t.Fatalf("all steps: %+v, %v; want 2", st, err)
	}
	// A late joiner is admitted as the rate allows.
	if j, _, err := s.Join(ctx, 7, 6, roomBegin.Add(3*time.Second), seedOf(1)); err != nil || j != 5 {
		t.Fatalf("late join = %d, %v", j, err)
	}
	if st, err = s.Advance(ctx, 7, roomBegin.Add(3*time.Second), seedOf(1), 5); err != nil || st.Boundary != 6 {
		t.Fatalf("after a late join: %+v, %v; want 6", st, err)
	}
}

func roomCap(t *testing.T, s ports.RoomStore) {
	ctx := context.Background()
	// stock 2 + margin 1: three passes outstanding at most.
	if err := s.Open(ctx, roomVoucher(t, 7, 2, 1000, 10*time.Second, 1)); err != nil {
		t.Fatal(err)
	}
	for u := domain.UserID(1); u <= 10; u++ {
		if _, _, err := s.Join(ctx, 7, u, roomBegin.Add(-time.Second), seedOf(1)); err != nil {
			t.Fatal(err)
		}
	}
	adv := func(at time.Duration) ports.RoomState {
		t.Helper()
		st, err := s.Advance(ctx, 7, roomBegin.Add(at), seedOf(1), -1)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := adv(time.Second); st.Boundary != 3 {
		t.Fatalf("at +1s: boundary %d; want the cap, 3", st.Boundary)
	}
	// A used pass frees its place at once; using it twice counts once, and
	// the store remembers whose pass was used, in this room only.
	if used, err := s.Used(ctx, 7, 1); err != nil || used {
		t.Fatalf("before any use: used = %v, %v; want false", used, err)
	}
	for range 2 {
		if err := s.Use(ctx, 7, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		id   domain.VoucherID
		user domain.UserID
		want bool
	}{{7, 1, true}, {7, 2, false}, {8, 1, false}} {
		if used, err := s.Used(ctx, c.id, c.user); err != nil || used != c.want {
			t.Fatalf("Used(voucher %d, user %d) = %v, %v; want %v", c.id, c.user, used, err, c.want)
		}
	}
	if st := adv(time.Second + 100*time.Millisecond); st.Boundary != 4 || st.Used != 1 {
		t.Fatalf("after one use: %+v; want boundary 4, 1 used", st)
	}
	// Unused passes expire a TTL after their step; the line moves on.
	st := adv(11 * time.Second)
	if st.Expired != 3 || st.Boundary != 6 || st.Lapsed != 2 {
		t.Fatalf("at +11s: %+v; want expired 3 (the first step, one of it used, two lapsed), boundary 6", st)
	}
	st = adv(11*time.Second + 100*time.Millisecond)
	if st.Expired != 4 || st.Boundary != 7 || st.Lapsed != 3 || len(st.Steps) != 2 || st.Steps[0].Boundary != 6 {
		t.Fatalf("at +11.1s: %+v; want expired 4, boundary 7, the two live steps", st)
	}
}

// A paused sale's line holds: the boundary stays while its gate says paused,
// and moves on as the rate allows once the sale resumes.
func roomPaused(t *testing.T, s ports.RoomStore, g ports.StockGate) {
	ctx := context.Background()
	v := roomVoucher(t, 7, 10, 10, 30*time.Second, 0)
	if err := s.Open(ctx, v); err != nil {
		t.Fatal(err)
	}
	if err := g.Preheat(ctx, v); err != nil {
		t.Fatal(err)
	}
	for u := domain.UserID(1); u <= 5; u++ {
		if _, _, err := s.Join(ctx, 7, u, roomBegin.Add(-time.Second), seedOf(1)); err != nil {
			t.Fatal(err)
		}
	}
	control := func(paused bool) {
		t.Helper()
		sale, err := v.Sale().WithPause(paused, roomBegin)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.(interface {
			Apply(context.Context, domain.Voucher) error
		}).Apply(ctx, v.WithSale(sale)); err != nil {
			t.Fatal(err)
		}
	}
	control(true)
	if st, err := s.Advance(ctx, 7, roomBegin.Add(300*time.Millisecond), seedOf(1), -1); err != nil || st.Boundary != 0 {
		t.Fatalf("paused, at +300ms: %+v, %v; want nobody admitted", st, err)
	}
	control(false)
	if st, err := s.Advance(ctx, 7, roomBegin.Add(400*time.Millisecond), seedOf(1), -1); err != nil || st.Boundary != 4 {
		t.Fatalf("resumed, at +400ms: %+v, %v; want 4 admitted, as the rate allows", st, err)
	}
}

func roomConcurrent(t *testing.T, s ports.RoomStore) {
	ctx := context.Background()
	if err := s.Open(ctx, roomVoucher(t, 7, 10, 50, 30*time.Second, 0)); err != nil {
		t.Fatal(err)
	}
	const users, conns = 50, 4
	start := make(chan struct{})
	var wg sync.WaitGroup
	got := make([][conns]int64, users)
	errs := make(chan error, users*conns)
	for u := range users {
		for c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				j, _, err := s.Join(ctx, 7, domain.UserID(u+1), roomBegin, seedOf(1))
				if err != nil {
					errs <- err
				}
				got[u][c] = j
			}()
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := make(map[int64]bool)
	for u, js := range got {
		for _, j := range js {
			if j != js[0] {
				t.Fatalf("user %d got places %v", u+1, js)
			}
		}
		if seen[js[0]] || js[0] < 0 || js[0] >= users {
			t.Fatalf("place %d given twice or out of [0,%d)", js[0], users)
		}
		seen[js[0]] = true
	}
}
