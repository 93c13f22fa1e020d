package redisgate_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The behaviour every StockGate shares is proven in test/contract; these tests
// cover what only the Redis layout has: keys, expiry, the live set, staging.

func voucher(t *testing.T, id domain.VoucherID, stock int, begin, end time.Time) domain.Voucher {
	t.Helper()
	sale, err := domain.NewSale(stock, begin, end)
	if err != nil {
		t.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "t"}, sale)
	if err != nil {
		t.Fatal(err)
	}
	return v.WithID(id)
}

func order(t *testing.T, id domain.OrderID, user domain.UserID, v domain.VoucherID) domain.VoucherOrder {
	t.Helper()
	o, err := domain.NewVoucherOrder(id, user, v)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestNewRefusesABraceInThePrefix(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted a prefix that would steal the hash tag")
		}
	}()
	_, rdb := testenv.MiniRedis(t)
	redisgate.New(rdb, redisgate.Options{Prefix: "app{x}:"})
}

func TestPreheatWritesTheLayoutWithExpiry(t *testing.T) {
	for _, b := range []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
		// miniredis keeps a TTL as a duration, so its PEXPIRETIME drifts by
		// the time since the key was written; real Redis answers exactly.
		slack int64
	}{
		{"miniredis", func(t *testing.T) redis.UniversalClient { _, c := testenv.MiniRedis(t); return c }, 1000},
		{"redis", func(t *testing.T) redis.UniversalClient { return testenv.RealRedis(t) }, 0},
	} {
		t.Run(b.name, func(t *testing.T) {
			rdb := b.rdb(t)
			prefix := testenv.KeyPrefix(t)
			testenv.DropPrefix(t, rdb, prefix)
			ctx := context.Background()
			g := redisgate.New(rdb, redisgate.Options{Prefix: prefix, Retention: 2 * time.Hour})
			now := testenv.WallClock{}.Now()
			begin, end := now.Add(-time.Minute), now.Add(time.Hour+123*time.Millisecond)
			if err := g.Preheat(ctx, voucher(t, 42, 5, begin, end)); err != nil {
				t.Fatal(err)
			}
			k := redisschema.KeysFor(prefix, 42)
			got, _ := rdb.HGetAll(ctx, k.Voucher).Result()
			if got["stock"] != "5" || got["begin"] != strconv.FormatInt(begin.UnixMilli(), 10) || got["end"] != strconv.FormatInt(end.UnixMilli(), 10) {
				t.Fatalf("voucher hash = %v", got)
			}
			if ok, _ := rdb.SIsMember(ctx, k.Live, "42").Result(); !ok {
				t.Fatal("voucher is not in the live set")
			}
			if err := g.Reserve(ctx, order(t, 1, 7, 42)); err != nil {
				t.Fatal(err)
			}
			// The buyers hash gets its expiry inside the claim script, where
			// end + retention is Lua arithmetic: it must come out exact.
			want := end.Add(2 * time.Hour).UnixMilli()
			for _, key := range []string{k.Voucher, k.Buyers} {
				at, err := rdb.PExpireTime(ctx, key).Result()
				if d := at.Milliseconds() - want; err != nil || d < -b.slack || d > b.slack {
					t.Fatalf("%s expires at %d (%v), want end + retention = %d", key, at.Milliseconds(), err, want)
				}
			}
		})
	}
}

func TestPreheatAfterRetentionLeavesNothing(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	ctx := context.Background()
	g := redisgate.New(rdb, redisgate.Options{Retention: time.Hour})
	now := testenv.WallClock{}.Now()
	if err := g.Preheat(ctx, voucher(t, 1, 5, now.Add(-3*time.Hour), now.Add(-2*time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := g.Reserve(ctx, order(t, 1, 7, 1)); !errors.Is(err, domain.ErrVoucherNotFound) {
		t.Fatalf("reserve on a sale past its retention: %v, want not found", err)
	}
}

func TestReserveRunsAfterTheScriptCacheIsFlushed(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	ctx := context.Background()
	g := redisgate.New(rdb, redisgate.Options{})
	now := testenv.WallClock{}.Now()
	if err := g.Preheat(ctx, voucher(t, 1, 5, now.Add(-time.Hour), now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := g.Reserve(ctx, order(t, 1, 7, 1)); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := g.Reserve(ctx, order(t, 2, 8, 1)); err != nil {
		t.Fatalf("reserve after SCRIPT FLUSH (EVALSHA must fall back to EVAL): %v", err)
	}
}

func TestPruneLiveDropsVouchersWhoseKeysExpired(t *testing.T) {
	for _, enqueue := range []bool{false, true} {
		t.Run(map[bool]string{false: "channel_mode", true: "stream_mode"}[enqueue], func(t *testing.T) {
			m, rdb := testenv.MiniRedis(t)
			ctx := context.Background()
			g := redisgate.New(rdb, redisgate.Options{Retention: time.Hour})
			reserve := g.Reserve
			if enqueue {
				reserve = g.ReserveAndAppend
			}
			now := testenv.WallClock{}.Now()
			if err := g.Preheat(ctx, voucher(t, 1, 5, now.Add(-time.Hour), now.Add(time.Hour))); err != nil {
				t.Fatal(err)
			}
			if err := g.Preheat(ctx, voucher(t, 2, 5, now.Add(-time.Hour), now.Add(10*time.Hour))); err != nil {
				t.Fatal(err)
			}
			if err := reserve(ctx, order(t, 11, 7, 1)); err != nil {
				t.Fatal(err)
			}
			if err := reserve(ctx, order(t, 12, 7, 2)); err != nil {
				t.Fatal(err)
			}
			m.FastForward(3 * time.Hour) // voucher 1's keys expire, voucher 2's do not

			if o, ok, err := g.Queued(ctx, 7, 12); err != nil || !ok || o.VoucherID() != 2 {
				t.Fatalf("queued(7, 12) = %v %v %v", o, ok, err)
			}
			if _, err := g.PruneLive(ctx); err != nil {
				t.Fatal(err)
			}
			live, _ := rdb.SMembers(ctx, redisschema.LiveSet(redisschema.DefaultPrefix)).Result()
			want := map[bool]int{false: 1, true: 2}[enqueue]
			if len(live) != want {
				// In stream mode the stream never expires: voucher 1 stays
				// discoverable until its consumer removes the stream.
				t.Fatalf("live set = %v, want %d members", live, want)
			}
		})
	}
}

func TestRestoreLeavesNoStagingKeys(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	ctx := context.Background()
	g := redisgate.New(rdb, redisgate.Options{})
	now := testenv.WallClock{}.Now()
	v := voucher(t, 1, 10, now.Add(-time.Hour), now.Add(time.Hour))
	buyers := make([]domain.VoucherOrder, 1500)
	for i := range buyers {
		buyers[i] = order(t, domain.OrderID(1000+i), domain.UserID(i+1), 1)
	}
	for i, want := range []bool{true, false} {
		wrote, err := g.Restore(ctx, v, buyers)
		if err != nil || wrote != want {
			t.Fatalf("restore #%d: wrote %v err %v, want wrote %v", i+1, wrote, err, want)
		}
		if keys, _ := rdb.Keys(ctx, "*restore*").Result(); len(keys) != 0 {
			t.Fatalf("restore #%d left staging keys %v", i+1, keys)
		}
	}
}

// Restore and Preheat racing on one voucher (a starting instance rebuilds
// the gate while the creating one preheats it) must end in one of the two
// whole states, never a mix, and a Preheat that comes second never wipes the
// restored buyers: they may hold reservations already answered success.
func TestRestoreAndPreheatRaceKeepsOneWholeState(t *testing.T) {
	for _, b := range []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
	}{
		{"miniredis", func(t *testing.T) redis.UniversalClient { _, c := testenv.MiniRedis(t); return c }},
		{"redis", func(t *testing.T) redis.UniversalClient { return testenv.RealRedis(t) }},
		{"redis_cluster", func(t *testing.T) redis.UniversalClient { return testenv.RedisCluster(t) }},
	} {
		t.Run(b.name, func(t *testing.T) {
			rdb := b.rdb(t)
			prefix := testenv.KeyPrefix(t)
			testenv.DropPrefix(t, rdb, prefix)
			g := redisgate.New(rdb, redisgate.Options{Prefix: prefix})
			ctx := context.Background()
			now := testenv.WallClock{}.Now()
			outcomes := map[string]int{}
			for round := 1; round <= 20; round++ {
				id := domain.VoucherID(round)
				buyers := make([]domain.VoucherOrder, 3000)
				for i := range buyers {
					buyers[i] = order(t, domain.OrderID(1000+i), domain.UserID(i+1), id)
				}
				var wg sync.WaitGroup
				var rerr, perr error
				start := make(chan struct{})
				wg.Add(2)
				go func() {
					defer wg.Done()
					<-start
					_, rerr = g.Restore(ctx, voucher(t, id, 1, now.Add(-time.Hour), now.Add(time.Hour)), buyers)
				}()
				go func() {
					defer wg.Done()
					<-start
					perr = g.Preheat(ctx, voucher(t, id, 77, now.Add(-time.Hour), now.Add(time.Hour)))
				}()
				close(start)
				wg.Wait()
				if rerr != nil || perr != nil {
					t.Fatalf("round %d: restore %v, preheat %v", round, rerr, perr)
				}
				stock, ok, err := g.Stock(ctx, id)
				if err != nil || !ok {
					t.Fatalf("round %d: stock present %v, err %v", round, ok, err)
				}
				bs, err := g.Buyers(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case stock == 77 && len(bs) == 0:
					outcomes["preheat_first"]++
				case stock == 1 && len(bs) == len(buyers):
					outcomes["restore_first"]++
				default:
					t.Fatalf("round %d: a mix: stock %d with %d buyers", round, stock, len(bs))
				}
			}
			t.Logf("outcomes: %v", outcomes)
		})
	}
}

// TestPreheatAfterRestoreKeepsReservations is the race the old Preheat lost:
// another instance restored the gate from the database and claims were
// admitted; the creating instance's Preheat arrives late. It used to DEL and
// rewrite the gate, so the admitted users could claim again and the stock
// was handed out twice.
func TestPreheatAfterRestoreKeepsReservations(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	g := redisgate.New(rdb, redisgate.Options{Prefix: "p:"})
	ctx := context.Background()
	now := testenv.WallClock{}.Now()
	v := voucher(t, 9, 2, now.Add(-time.Hour), now.Add(time.Hour))
	if _, err := g.Restore(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.Reserve(ctx, order(t, 100, 1, 9)); err != nil {
		t.Fatal(err)
	}
	if err := g.Preheat(ctx, v); err != nil {
		t.Fatal(err)
	}
	if err := g.Reserve(ctx, order(t, 101, 1, 9)); !errors.Is(err, domain.ErrAlreadyClaimed) {
		t.Fatalf("user 1 claims again after the late preheat: %v, want already claimed", err)
	}
	if stock, _, _ := g.Stock(ctx, 9); stock != 1 {
		t.Fatalf("stock %d after one claim of 2, want 1", stock)
	}
	if live, _ := rdb.SIsMember(ctx, redisschema.LiveSet("p:"), 9).Result(); !live {
		t.Fatal("the voucher is not in the live set")
	}
}

func dropPrefix(rdb redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = testenv.DeletePrefix(ctx, rdb, prefix)
}

// failSAdd makes every SADD fail, as a Redis that drops the connection
// between the gate's writes would.
type failSAdd struct{}

func (failSAdd) DialHook(next redis.DialHook) redis.DialHook { return next }
func (failSAdd) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "sadd" {
			err := errors.New("injected: connection reset")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (failSAdd) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A Preheat whose live-set write fails must leave no claimable gate: the
// stream consumers find vouchers through the live set, so a claim admitted
// there would sit in a stream nobody reads. The old order (gate, then live
// set) left exactly that state behind the 500.
func TestPreheatThatCannotJoinTheLiveSetLeavesNothingClaimable(t *testing.T) {
	m, rdb := testenv.MiniRedis(t)
	broken := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = broken.Close() })
	broken.AddHook(failSAdd{})
	g := redisgate.New(broken, redisgate.Options{Prefix: "p:"})
	ctx := context.Background()
	now := testenv.WallClock{}.Now()
	if err := g.Preheat(ctx, voucher(t, 5, 3, now.Add(-time.Hour), now.Add(time.Hour))); err == nil {
		t.Fatal("preheat reported success without its live-set entry")
	}
	healthy := redisgate.New(rdb, redisgate.Options{Prefix: "p:"})
	if err := healthy.Reserve(ctx, order(t, 100, 1, 5)); !errors.Is(err, domain.ErrVoucherNotFound) {
		t.Fatalf("claim after the failed preheat: %v, want not found (nothing claimable)", err)
	}
}

// A prune that runs between a Preheat's first live-set write and its gate
// write sees no keys and removes the entries; the Preheat writes them again
// after the gate, split or not, so the stream consumers find every bucket's
// stream at once rather than after the next repair.
func TestPreheatOutlivesAPruneBetweenItsWrites(t *testing.T) {
	for _, k := range []int{1, 3} {
		t.Run("k"+strconv.Itoa(k), func(t *testing.T) {
			m, rdb := testenv.MiniRedis(t)
			ctx := context.Background()
			pruner := redisgate.New(rdb, redisgate.Options{Prefix: "p:"})
			racing := redis.NewClient(&redis.Options{Addr: m.Addr()})
			t.Cleanup(func() { _ = racing.Close() })
			racing.AddHook(afterFirst(func(cmd redis.Cmder) bool { return cmd.Name() == "sadd" }, func() {
				if n, err := pruner.PruneLive(ctx); err != nil || n != k {
					t.Errorf("the racing prune removed %d (%v), want the %d new entries", n, err, k)
				}
			}))
			now := testenv.WallClock{}.Now()
			v := splitInto(t, voucher(t, 5, 6, now.Add(-time.Hour), now.Add(time.Hour)), k)
			if err := redisgate.New(racing, redisgate.Options{Prefix: "p:"}).Preheat(ctx, v); err != nil {
				t.Fatal(err)
			}
			live, err := rdb.SMembers(ctx, redisschema.LiveSet("p:")).Result()
			if err != nil || len(live) != k {
				t.Fatalf("live set after the preheat: %v (%v), want its %d buckets", live, err, k)
			}
		})
	}
}

// A split restore's lock can outlive its restore's budget and be taken by
// another instance; the former holder, done at last, must leave the new
// holder's lock alone, or a third instance could restore the same buckets
// beside the second. The lock is taken over right after the holder's first
// look at it once it is done (its GET, in a read-then-delete release).
func TestRestoreReleasesOnlyItsOwnLock(t *testing.T) {
	m, rdb := testenv.MiniRedis(t)
	ctx := context.Background()
	now := testenv.WallClock{}.Now()
	v := splitInto(t, voucher(t, 7, 6, now.Add(-time.Hour), now.Add(time.Hour)), 3)
	lock := redisschema.BucketLock("p:", v.ID())
	holder := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = holder.Close() })
	holder.AddHook(afterFirst(func(cmd redis.Cmder) bool {
		return cmd.Name() != "set" && slices.Contains(cmd.Args(), any(lock))
	}, func() {
		if err := rdb.Set(ctx, lock, "another instance", time.Minute).Err(); err != nil {
			t.Error(err)
		}
	}))
	g := redisgate.New(holder, redisgate.Options{Prefix: "p:"})
	if err := g.Preheat(ctx, v); err != nil {
		t.Fatal(err)
	}
	if err := g.Overwrite(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := rdb.Get(ctx, lock).Result(); err != nil || got != "another instance" {
		t.Fatalf("the new holder's lock after the former one finished: %q (%v)", got, err)
	}
}

// afterFirst runs f once, right after the first command that match accepts
// has answered.
func afterFirst(match func(redis.Cmder) bool, f func()) redis.Hook {
	return afterFirstHook{match, f, new(sync.Once)}
}

type afterFirstHook struct {
	match func(redis.Cmder) bool
	f     func()
	once  *sync.Once
}

func (afterFirstHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h afterFirstHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.match(cmd) {
			h.once.Do(h.f)
		}
		return err
	}
}
func (afterFirstHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A gate that holds another sale's window under the same id (the database
// was reset, Redis kept its keys) is neither overwritten nor silently used.
func TestPreheatRefusesAGateOfAnotherSale(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	g := redisgate.New(rdb, redisgate.Options{Prefix: "p:"})
	ctx := context.Background()
	now := testenv.WallClock{}.Now()
	if err := g.Preheat(ctx, voucher(t, 4, 2, now.Add(-time.Hour), now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := g.Reserve(ctx, order(t, 100, 1, 4)); err != nil {
		t.Fatal(err)
	}
	if err := g.Preheat(ctx, voucher(t, 4, 9, now.Add(-time.Hour), now.Add(2*time.Hour))); err == nil {
		t.Fatal("a preheat over another sale's gate reported success")
	}
	if stock, _, _ := g.Stock(ctx, 4); stock != 1 {
		t.Fatalf("stock %d, want the first sale's 1 left as it was", stock)
	}
}

// An unsplit voucher's hash lost while its stream survived (an eviction, a
// DEL): the stream still holds an order sold and not yet in the database,
// whose unit the database's stock still counts. The rebuilt gate holds the
// database's stock less that unit, so the sale sells exactly what the
// database can take.
func TestRebuildLeavesOutTheUnitsOfQueuedOrders(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	g := redisgate.New(rdb, redisgate.Options{Prefix: "q:"})
	ctx := context.Background()
	now := testenv.WallClock{}.Now()
	v := voucher(t, 9, 5, now.Add(-time.Hour), now.Add(time.Hour))
	if err := g.Preheat(ctx, v); err != nil {
		t.Fatal(err)
	}
	if err := g.ReserveAndAppend(ctx, order(t, 100, 1, 9)); err != nil {
		t.Fatal(err)
	}
	k := redisschema.KeysFor("q:", 9)
	if err := rdb.Del(ctx, k.Voucher, k.Buyers).Err(); err != nil {
		t.Fatal(err)
	}
	if wrote, err := g.Restore(ctx, v, nil); err != nil || !wrote {
		t.Fatalf("restore: wrote %v, err %v", wrote, err)
	}
	if stock, _, _ := g.Stock(ctx, 9); stock != 4 {
		t.Fatalf("rebuilt stock %d, want 4: the database's 5 less the order in the stream", stock)
	}
}

// The rebuild reads the database after counting the stream: an order written
// to the database and deleted from the stream after the caller read the
// database is counted once, not sold again.
func TestRebuildReadsTheDatabaseAfterRedis(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	ctx := context.Background()
	vouchers := memory.NewVouchers()
	orders := memory.NewOrders(vouchers)
	now := testenv.WallClock{}.Now()
	v, err := vouchers.AddSeckill(ctx, voucher(t, 1, 5, now.Add(-time.Hour), now.Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	g := redisgate.New(rdb, redisgate.Options{Prefix: "r:", Vouchers: vouchers, Orders: orders})
	if err := g.Preheat(ctx, v); err != nil {
		t.Fatal(err)
	}
	o1, o2 := order(t, 100, 1, v.ID()), order(t, 101, 2, v.ID())
	for _, o := range []domain.VoucherOrder{o1, o2} {
		if err := g.ReserveAndAppend(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	stale := v // the caller's read: 5 left, no orders
	k := redisschema.KeysFor("r:", v.ID())
	if err := rdb.Del(ctx, k.Voucher, k.Buyers).Err(); err != nil {
		t.Fatal(err)
	}
	// o2 reaches the database and leaves the stream.
	if _, err := orders.CreateBatch(ctx, []domain.VoucherOrder{o2}); err != nil {
		t.Fatal(err)
	}
	entries, err := rdb.XRange(ctx, k.Orders, "-", "+").Result()
	if err != nil || len(entries) != 2 {
		t.Fatalf("stream: %v, %v", entries, err)
	}
	if err := rdb.XDel(ctx, k.Orders, entries[1].ID).Err(); err != nil {
		t.Fatal(err)
	}
	if wrote, err := g.Restore(ctx, stale, nil); err != nil || !wrote {
		t.Fatalf("restore: wrote %v, err %v", wrote, err)
	}
	if stock, _, _ := g.Stock(ctx, v.ID()); stock != 3 {
		t.Fatalf("rebuilt stock %d, want 3: 4 in the database less o1 in the stream", stock)
	}
	if bs, _ := g.Buyers(ctx, v.ID()); bs[o2.ID()] != 2 {
		t.Fatalf("buyers %v: the database's o2 is not marked", bs)
	}
}
