package contract_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// idsStore is one shared backend; instance starts another issuer on it, as
// another process or a restarted one would.
type idsStore struct {
	instance func(clock ports.Clock) ports.OrderIDs
}

type idsBackend struct {
	name string
	open func(t *testing.T) func(t *testing.T) idsStore
}

// idsBlock is small so the suite crosses many lease boundaries, where
// uniqueness across instances is decided.
const idsBlock = 7

func idsBackends() []idsBackend {
	// pipelined: leases go through the client's automatic pipeliner, as in
	// the service.
	redisStore := func(t *testing.T, rdb redis.UniversalClient, pipelined bool) idsStore {
		prefix := testenv.KeyPrefix(t)
		testenv.DropPrefix(t, rdb, prefix)
		var leases redis.UniversalClient
		if pipelined {
			leases = testenv.AutoPipelined(t, rdb, false)
		}
		return idsStore{instance: func(clock ports.Clock) ports.OrderIDs {
			g := redisgate.NewIDs(rdb, redisgate.IDOptions{Prefix: prefix + "icr:order:", Block: idsBlock, Clock: clock, Leases: leases})
			t.Cleanup(func() { _ = g.Close() })
			return g
		}}
	}
	backends := []idsBackend{
		// The fake's store is its in-process sequence; Sharing starts another
		// issuer on it.
		{name: "memory", open: func(*testing.T) func(t *testing.T) idsStore {
			return func(*testing.T) idsStore {
				var (
					mu   sync.Mutex
					root *memory.IDs
				)
				return idsStore{instance: func(clock ports.Clock) ports.OrderIDs {
					mu.Lock()
					defer mu.Unlock()
					if root == nil {
						root = memory.NewIDs(clock)
						return root
					}
					return root.Sharing(clock)
				}}
			}
		}},
		{name: "miniredis", open: func(*testing.T) func(t *testing.T) idsStore {
			return func(t *testing.T) idsStore {
				_, rdb := testenv.MiniRedis(t)
				return redisStore(t, rdb, false)
			}
		}},
	}
	for _, b := range testenv.RealRedisBackends() {
		connect := b.Client
		for _, pipelined := range []bool{false, true} {
			name := b.Name
			if pipelined {
				name += "_autopipelined"
			}
			backends = append(backends, idsBackend{name: name, open: func(t *testing.T) func(t *testing.T) idsStore {
				rdb := connect(t)
				return func(t *testing.T) idsStore { return redisStore(t, rdb, pipelined) }
			}})
		}
	}
	return backends
}

// idsSeen collects IDs and fails on the first one issued twice.
type idsSeen struct {
	mu  sync.Mutex
	ids map[domain.OrderID]bool
}

func (s *idsSeen) add(t *testing.T, id domain.OrderID) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = make(map[domain.OrderID]bool)
	}
	if s.ids[id] {
		t.Errorf("order id %d (second %s, seq %d) issued twice", id, id.Time().Format(time.RFC3339), id.Seq())
	}
	s.ids[id] = true
}

func idsNext(t *testing.T, g ports.OrderIDs) domain.OrderID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := g.Next(ctx)
	if err != nil {
		t.Fatalf("next order id: %v", err)
	}
	return id
}

// drop forgets an ID handed back: it was written nowhere, so it may come again.
func (s *idsSeen) drop(id domain.OrderID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ids, id)
}

// idsFire has every instance issue n IDs from each of workers goroutines, all
// released together, and records them in seen.
func idsFire(t *testing.T, seen *idsSeen, instances []ports.OrderIDs, workers, n int) {
	idsFireBack(t, seen, instances, workers, n, 0)
}

// idsFireBack is idsFire where every giveBack-th ID of a worker is handed
// back (Unused), as a refused claim does, instead of being kept.
func idsFireBack(t *testing.T, seen *idsSeen, instances []ports.OrderIDs, workers, n, giveBack int) {
	t.Helper()
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, len(instances)*workers)
	for _, g := range instances {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range n {
					id, err := g.Next(context.Background())
					if err != nil {
						errs <- err
						return
					}
					// Recorded before it may be handed back: a reissue
					// before drop would then read as issued twice.
					seen.add(t, id)
					if giveBack > 0 && i%giveBack == 0 {
						seen.drop(id)
						g.Unused(id)
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("next order id: %v", err)
	}
}

var idsDay = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

var idsCases = []struct {
	name string
	run  func(t *testing.T, st idsStore)
}{
	{"ids_have_the_original_layout", func(t *testing.T, st idsStore) {
		clock := testenv.NewClock(idsDay.Add(1500 * time.Millisecond))
		g := st.instance(clock)
		id := idsNext(t, g)
		if !id.Time().Equal(idsDay.Add(time.Second)) {
			t.Fatalf("id %d carries second %s, want %s", id, id.Time(), idsDay.Add(time.Second))
		}
		if id.Seq() == 0 {
			t.Fatalf("id %d has sequence 0", id)
		}
		if _, err := domain.NewVoucherOrder(id, 1, 1); err != nil {
			t.Fatalf("id %d is not a valid order id: %v", id, err)
		}
	}},
	{"unique_under_concurrency_across_instances", func(t *testing.T, st idsStore) {
		clock := testenv.NewClock(idsDay)
		var seen idsSeen
		idsFire(t, &seen, []ports.OrderIDs{st.instance(clock), st.instance(clock), st.instance(clock)}, 8, 250)
		if len(seen.ids) != 3*8*250 {
			t.Fatalf("%d distinct ids, want %d", len(seen.ids), 3*8*250)
		}
	}},
	{"unique_with_ids_handed_back", func(t *testing.T, st idsStore) {
		// A third of the ids come back, as refused claims' do, and are
		// reissued while the others are issued: every id kept is distinct.
		clock := testenv.NewClock(idsDay)
		var seen idsSeen
		idsFireBack(t, &seen, []ports.OrderIDs{st.instance(clock), st.instance(clock), st.instance(clock)}, 8, 150, 3)
		if want := 3 * 8 * 100; len(seen.ids) != want {
			t.Fatalf("%d distinct ids kept, want %d", len(seen.ids), want)
		}
	}},
	{"unique_under_concurrency_across_midnight", func(t *testing.T, st idsStore) {
		// Each worker steps its instance's clock over midnight and back
		// while the instance's other workers issue: each lease must serve
		// its own day only, whoever's clock moved.
		before := time.Date(2025, 3, 1, 23, 59, 59, 0, time.UTC)
		var seen idsSeen
		var wg sync.WaitGroup
		for range 3 {
			clock := testenv.NewClock(before)
			g := st.instance(clock)
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 200 {
						clock.Set(before.Add(time.Duration((i/7+w)%2) * time.Second))
						id, err := g.Next(context.Background())
						if err != nil {
							t.Errorf("next order id: %v", err)
							return
						}
						seen.add(t, id)
						if i%5 == 0 {
							seen.drop(id)
							g.Unused(id)
						}
					}
				}()
			}
		}
		wg.Wait()
	}},
	{"reused_id_carries_the_current_second", func(t *testing.T, st idsStore) {
		// Issue 26: an id handed back and reissued later is stamped with
		// the second it is reissued in, not the refused claim's.
		clock := testenv.NewClock(idsDay)
		g := st.instance(clock)
		refused := idsNext(t, g)
		g.Unused(refused)
		clock.Advance(90 * time.Second)
		id := idsNext(t, g)
		if want := idsDay.Add(90 * time.Second); !id.Time().Equal(want) {
			t.Fatalf("reissued id %d carries second %s, want %s (the refused claim's was %s)", id, id.Time(), want, refused.Time())
		}
		var seen idsSeen
		seen.add(t, id)
		for range 3 * idsBlock {
			seen.add(t, idsNext(t, g))
		}
	}},
	{"reused_id_stays_on_its_day", func(t *testing.T, st idsStore) {
		// A number handed back before midnight is not reissued after it:
		// the new day's counters hand it out again.
		before := time.Date(2025, 3, 1, 23, 59, 59, 0, time.UTC)
		clock := testenv.NewClock(before)
		g, other := st.instance(clock), st.instance(clock)
		g.Unused(idsNext(t, g))
		clock.Advance(time.Second)
		var seen idsSeen
		for range 3 * idsBlock {
			for _, h := range []ports.OrderIDs{g, other} {
				id := idsNext(t, h)
				if !id.Time().Equal(before.Add(time.Second)) {
					t.Fatalf("id %d carries second %s, want %s", id, id.Time(), before.Add(time.Second))
				}
				seen.add(t, id)
			}
		}
	}},
	{"unique_across_restart", func(t *testing.T, st idsStore) {
		clock := testenv.NewClock(idsDay)
		var seen idsSeen
		first := st.instance(clock)
		for range 100 {
			seen.add(t, idsNext(t, first))
		}
		restarted := st.instance(clock)
		for range 100 {
			seen.add(t, idsNext(t, restarted))
		}
		// The first instance still holds part of its lease; it must not
		// overlap what the restarted one leased after it.
		for range 100 {
			seen.add(t, idsNext(t, first))
		}
	}},
	{"unique_across_midnight_both_ways", func(t *testing.T, st idsStore) {
		before := time.Date(2025, 3, 1, 23, 59, 59, 500_000_000, time.UTC)
		after := before.Add(time.Second) // 2025-03-02 00:00:00.5
		clockA, clockB := testenv.NewClock(before), testenv.NewClock(after)
		a, b := st.instance(clockA), st.instance(clockB)
		var seen idsSeen
		check := func(g ports.OrderIDs, want time.Time) {
			t.Helper()
			for range 10 {
				id := idsNext(t, g)
				if !id.Time().Equal(want.Truncate(time.Second)) {
					t.Fatalf("id %d carries second %s, want %s", id, id.Time(), want.Truncate(time.Second))
				}
				seen.add(t, id)
			}
		}
		// Each instance ends a step holding the rest of a lease. An issuer
		// that carried a lease over midnight would stamp the old day's
		// sequence numbers with the new day's second, where the other
		// instance hands out the same numbers from the new day's counter.
		check(a, before)
		check(b, after)
		clockA.Set(after) // a crosses midnight while b is already there
		check(a, after)
		check(b, after)
		clockB.Set(before) // b's clock steps back over midnight
		check(b, before)
		check(a, after)
		check(b, before)
	}},
}

func TestOrderIDsContract(t *testing.T) {
	for _, b := range idsBackends() {
		t.Run(b.name, func(t *testing.T) {
			newStore := b.open(t)
			for _, tc := range idsCases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
			}
		})
	}
}
