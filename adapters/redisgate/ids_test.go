package redisgate_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// Uniqueness across instances, restarts and midnight, and leases that go
// round a failing shard, are proven in test/contract; these tests pin the
// leasing: blocks, leasing ahead, exhaustion, Close.

// shardOf splits a sequence number into its shard and the shard's n.
func shardOf(seq uint32) (int, uint32) {
	const shift = 32 - 4 // log2(IDShards)
	return int(seq >> shift), seq & (1<<shift - 1)
}

// leaseHook counts INCRBY commands (leases) and the keys they went to, and
// refuses or stalls every command while told to.
type leaseHook struct {
	n       atomic.Int64 // INCRBY commands that entered the hook
	leased  atomic.Int64 // INCRBY commands Redis answered
	refuse  atomic.Bool
	stall   atomic.Bool
	delay   time.Duration // every command answers this late (set before use)
	running atomic.Int64  // commands inside the hook now

	mu   sync.Mutex
	keys map[string]int
}

func (h *leaseHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *leaseHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.running.Add(1)
		defer h.running.Add(-1)
		if cmd.Name() == "incrby" {
			h.n.Add(1)
			h.mu.Lock()
			if h.keys == nil {
				h.keys = make(map[string]int)
			}
			h.keys[cmd.Args()[1].(string)]++
			h.mu.Unlock()
		}
		if h.delay > 0 {
			select {
			case <-time.After(h.delay): // latency, not synchronisation
			case <-ctx.Done():
				cmd.SetErr(ctx.Err())
				return ctx.Err()
			}
		}
		if h.stall.Load() {
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		if h.refuse.Load() {
			err := errors.New("connection refused (test)")
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		if err == nil && cmd.Name() == "incrby" {
			h.leased.Add(1)
		}
		return err
	}
}
func (h *leaseHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func next(t *testing.T, g *redisgate.IDs) domain.OrderID {
	t.Helper()
	id, err := g.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func closeIDs(t *testing.T, g *redisgate.IDs) {
	t.Cleanup(func() { _ = g.Close() })
}

var idsNoon = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// Each lease is one round trip for Block ids, the leases go round the shards
// (a new counter each), and each block's numbers come in order.
func TestIDsCostOneRoundTripPerBlockAndRotateShards(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	var hook leaseHook
	rdb.AddHook(&hook)
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{Block: 3, Clock: testenv.NewClock(idsNoon)})
	const n = 30
	var prev domain.OrderID
	for i := range n {
		id := next(t, g)
		_, seq := shardOf(id.Seq())
		if i%3 != 0 && id.Seq() != prev.Seq()+1 {
			t.Fatalf("id %d: seq %d does not follow %d within its block", i, id.Seq(), prev.Seq())
		}
		if want := uint32(1); i%3 == 0 && seq != want {
			t.Fatalf("id %d opens a block at n %d, want %d (a fresh counter)", i, seq, want)
		}
		prev = id
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	// n/3 blocks, and at most one more leased ahead.
	if got := hook.n.Load(); got < n/3 || got > n/3+1 {
		t.Fatalf("%d ids in blocks of 3 took %d leases, want %d or %d", n, got, n/3, n/3+1)
	}
	for key, leases := range hook.keys {
		if leases != 1 {
			t.Fatalf("counter %s leased %d times among %d leases, want each lease on the next shard", key, leases, hook.n.Load())
		}
	}
}

// The block after the one in use is leased once it is half spent, so the
// ids after it come without Redis: here Redis refuses everything once the
// lease ahead has landed, and the next block's ids still come.
func TestIDsLeaseTheNextBlockAhead(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	var hook leaseHook
	rdb.AddHook(&hook)
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{Block: 10, Clock: testenv.NewClock(idsNoon)})
	closeIDs(t, g)
	for range 6 {
		next(t, g)
	}
	// Answered, not only sent: a lease still inside the hook when Redis
	// starts refusing would be refused too.
	testenv.Eventually(t, 5*time.Second, func() (bool, string) {
		return hook.leased.Load() == 2, "waiting for the lease ahead"
	})
	hook.refuse.Store(true)
	seen := map[int]bool{}
	for range 14 { // the 4 left of the first block and the 10 leased ahead
		shard, _ := shardOf(next(t, g).Seq())
		seen[shard] = true
	}
	if len(seen) != 2 {
		t.Fatalf("ids came from shards %v, want the first block's and the one leased ahead", seen)
	}
	if _, err := g.Next(context.Background()); err == nil {
		t.Fatal("an id after both blocks with Redis refusing")
	}
}

func TestIDsDropTheLeaseWhenTheDayChanges(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	c := testenv.NewClock(time.Date(2025, 3, 1, 23, 59, 59, 0, time.UTC))
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{Clock: c})
	closeIDs(t, g)
	if _, n := shardOf(next(t, g).Seq()); n != 1 {
		t.Fatalf("first id n %d, want 1", n)
	}
	c.Set(time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC))
	id := next(t, g)
	if _, n := shardOf(id.Seq()); n != 1 || !id.Time().Equal(c.Now()) {
		t.Fatalf("first id of the new day: n %d at %s, want n 1 from a new day's counter at %s", n, id.Time(), c.Now())
	}
}

// Every shard hands out its last number, then the day is spent.
func TestIDsFailWhenTheDaysSequenceIsExhausted(t *testing.T) {
	m, rdb := testenv.MiniRedis(t)
	// Blocks of one: a lease per id, one on each shard in turn. No lease
	// asks a second shard (LeaseTimeout an hour): on a loaded machine a
	// round trip past the default 250 ms would lease a block it does not
	// use, spending a shard's last number before its turn.
	opts := redisgate.IDOptions{Block: 1, Clock: testenv.NewClock(idsNoon), LeaseTimeout: time.Hour}
	g := redisgate.NewIDs(rdb, opts)
	for range redisgate.IDShards {
		next(t, g)
	}
	if err := g.Close(); err != nil { // no lease in flight past here
		t.Fatal(err)
	}
	keys := m.Keys()
	if len(keys) != redisgate.IDShards {
		t.Fatalf("%d counters after %d leases: %v", len(keys), redisgate.IDShards, keys)
	}
	for _, k := range keys {
		if err := m.Set(k, "268435454"); err != nil { // 2^28-2
			t.Fatal(err)
		}
	}
	opts.Block = 0 // the default
	g2 := redisgate.NewIDs(rdb, opts)
	closeIDs(t, g2)
	shards := map[int]bool{}
	for range redisgate.IDShards {
		shard, n := shardOf(next(t, g2).Seq())
		if n != 1<<28-1 || shards[shard] {
			t.Fatalf("shard %d n %d (shards so far %v), want the last n of a shard not seen yet", shard, n, shards)
		}
		shards[shard] = true
	}
	if _, err := g2.Next(context.Background()); !errors.Is(err, redisgate.ErrSequenceExhausted) {
		t.Fatalf("next after every shard's last seq: %v, want ErrSequenceExhausted", err)
	}
}

func TestIDsRefuseAClockOutsideTheIDRange(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{Clock: testenv.NewClock(time.Date(2021, 12, 31, 0, 0, 0, 0, time.UTC))})
	closeIDs(t, g)
	if _, err := g.Next(context.Background()); err == nil {
		t.Fatal("issued an id before the 2022 epoch")
	}
}

// Close ends the lease in flight and waits for it: no command of the issuer
// is left running, and a caller waiting for the lease is answered.
func TestIDsCloseEndsTheLeaseInFlight(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	var hook leaseHook
	hook.stall.Store(true)
	rdb.AddHook(&hook)
	// A lease timeout longer than the test: only Close can end the attempt.
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{LeaseTimeout: time.Hour})
	got := make(chan error, 1)
	go func() {
		_, err := g.Next(context.Background())
		got <- err
	}()
	testenv.Eventually(t, 5*time.Second, func() (bool, string) {
		return hook.running.Load() == 1, "waiting for the lease to stall"
	})
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if n := hook.running.Load(); n != 0 {
		t.Fatalf("%d commands still running after Close", n)
	}
	if err := <-got; !errors.Is(err, redisgate.ErrIDsClosed) {
		t.Fatalf("the waiting Next: %v, want ErrIDsClosed", err)
	}
	if _, err := g.Next(context.Background()); !errors.Is(err, redisgate.ErrIDsClosed) {
		t.Fatalf("Next after Close: %v, want ErrIDsClosed", err)
	}
}

func TestIDsRefuseBadOptions(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	for _, tc := range []struct {
		name string
		opts redisgate.IDOptions
	}{
		{"block_negative", redisgate.IDOptions{Block: -1}},
		{"block_beyond_a_shard", redisgate.IDOptions{Block: 1 << 28}},
		{"lease_timeout_negative", redisgate.IDOptions{LeaseTimeout: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("NewIDs accepted it")
				}
			}()
			redisgate.NewIDs(rdb, tc.opts)
		})
	}
}

// TestIDsFromALeaseAllocateNothing: an id handed out of a lease already held,
// or reissued after a refused claim, costs no allocation (the day is
// compared as a date, and formatted only for a lease).
func TestIDsFromALeaseAllocateNothing(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{Block: 1 << 20})
	closeIDs(t, g)
	next(t, g) // takes the lease
	for _, tc := range []struct {
		name string
		run  func()
	}{
		{"from_the_block", func() { next(t, g) }},
		{"handed_back_and_reissued", func() { g.Unused(next(t, g)); next(t, g) }},
	} {
		if n := testing.AllocsPerRun(1000, tc.run); n != 0 {
			t.Fatalf("%s: %.1f allocations per id, want 0", tc.name, n)
		}
	}
}

// A number handed back is reissued on its own day only: after midnight the
// next id comes from a new day's lease (a fresh counter on the next shard in
// turn), not from the old day's lease this instance held.
func TestIDsDropHandedBackNumbersWhenTheDayChanges(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	c := testenv.NewClock(time.Date(2025, 3, 1, 23, 59, 59, 0, time.UTC))
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{Clock: c})
	closeIDs(t, g)
	old := next(t, g)
	g.Unused(old)
	if again := next(t, g); again != old {
		t.Fatalf("handed back %d and got %d in the same second, want it again", old, again)
	}
	g.Unused(old)
	c.Set(time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC))
	if id := next(t, g); id.Seq() == old.Seq() {
		t.Fatalf("after midnight got seq %d again, the number handed back on the day before", id.Seq())
	}
}

// A Redis slower than LeaseTimeout is slow, not dead: the lease asks other
// shards meanwhile but still takes the first answer. (Abandoning each
// attempt at LeaseTimeout failed the first lease of a stampede on the
// cluster, TestStampedeSellsExactlyTheStock, where it took 300 ms.)
func TestIDsWaitOutASlowRedis(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	hook := leaseHook{delay: 50 * time.Millisecond} // a lease is two commands: 100 ms
	rdb.AddHook(&hook)
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{LeaseTimeout: 20 * time.Millisecond})
	closeIDs(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := g.Next(ctx); err != nil {
		t.Fatalf("next order id from a Redis leasing in 100 ms with a 20 ms lease timeout: %v", err)
	}
	if n := hook.n.Load(); n < 2 {
		t.Fatalf("%d attempts, want the lease to have asked another shard while the first was slow", n)
	}
}
