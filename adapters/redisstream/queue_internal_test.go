package redisstream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The behaviour callers see is proven in test/contract (the OrderQueue suite)
// and queue_test.go. These tests cover the parts only reachable from inside:
// option checks, stream states, the sharded (cluster) read path, the garbage
// collection of streams, and recovery from lost replies and groups.

func TestNewValidatesOptions(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	tests := []struct {
		name    string
		opts    Options
		wantErr string
		check   func(t *testing.T, o Options)
	}{
		{name: "defaults", opts: Options{Consumer: "c1"}, check: func(t *testing.T, o Options) {
			want := Options{Prefix: "seckill:", Group: "seckill", Consumer: "c1", Block: 200 * time.Millisecond,
				MinIdle: 30 * time.Second, ClaimInterval: 15 * time.Second, DeadLetter: "seckill:dead-letter"}
			o.Log = want.Log
			if fmt.Sprint(o) != fmt.Sprint(want) {
				t.Fatalf("options %+v, want %+v", o, want)
			}
		}},
		{name: "claim_interval_follows_min_idle", opts: Options{Consumer: "c1", MinIdle: time.Second}, check: func(t *testing.T, o Options) {
			if o.ClaimInterval != 500*time.Millisecond {
				t.Fatalf("ClaimInterval %s, want MinIdle/2", o.ClaimInterval)
			}
		}},
		{name: "consumer_is_required", opts: Options{}, wantErr: "Consumer is required"},
		{name: "prefix_must_not_take_the_hash_tag", opts: Options{Consumer: "c1", Prefix: "a{b}:"}, wantErr: "must not contain"},
		{name: "block_below_a_millisecond", opts: Options{Consumer: "c1", Block: time.Microsecond}, wantErr: "Block"},
		{name: "negative_block", opts: Options{Consumer: "c1", Block: -time.Second}, wantErr: "Block"},
		{name: "tiny_min_idle", opts: Options{Consumer: "c1", MinIdle: time.Millisecond}, wantErr: "MinIdle"},
		{name: "negative_claim_interval", opts: Options{Consumer: "c1", ClaimInterval: -1}, wantErr: "ClaimInterval"},
		{name: "negative_linger", opts: Options{Consumer: "c1", Linger: -time.Millisecond}, wantErr: "Linger"},
		{name: "linger_above_max", opts: Options{Consumer: "c1", Linger: MaxLinger + time.Millisecond}, wantErr: "Linger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := New(rdb, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New = %v, want an error about %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			tt.check(t, q.opts)
		})
	}
	if _, err := New(nil, Options{Consumer: "c1"}); err == nil {
		t.Fatal("New accepted a nil client")
	}
}

func TestRefsAndIDs(t *testing.T) {
	r := entryRef{stream: "a/b:{7}:orders", id: "1700-3"}
	back, err := parseRef(r.String())
	if err != nil || back != r {
		t.Fatalf("parseRef(%q) = %+v, %v", r.String(), back, err)
	}
	for _, bad := range []string{"", "1700-3", "stream/", "/1700-3"} {
		if _, err := parseRef(bad); err == nil {
			t.Fatalf("parseRef(%q) accepted it", bad)
		}
	}
	tests := []struct {
		a, b string
		less bool
	}{
		{"1-0", "1-1", true},
		{"9-9", "10-0", true}, // numeric, not lexical
		{"10-0", "9-9", false},
		{"5-5", "5-5", false},
	}
	for _, tt := range tests {
		if got := cmpID(tt.a, tt.b) < 0; got != tt.less {
			t.Fatalf("cmpID(%s, %s) < 0 = %v", tt.a, tt.b, got)
		}
	}
	// idLess parses both IDs: cmpID's text comparison (how finish sorts IDs
	// for ack.lua) agrees with it, and so does its fallback for IDs not in
	// Redis's form.
	idLess := func(a, b string) bool {
		am, as := splitID(a)
		bm, bs := splitID(b)
		return am < bm || am == bm && as < bs
	}
	ids := []string{"0-0", "0-1", "1-0", "1-9", "1-10", "9-9", "9-10", "10-0", "10-1", "10-99", "10-100",
		"99-5", "100-0", "1700000000000-7", "1700000000001-0", "01-1", "1-01", "1-", "-1", "x", ""}
	for _, a := range ids {
		for _, b := range ids {
			want := 0
			if idLess(a, b) {
				want = -1
			} else if idLess(b, a) {
				want = 1
			}
			if got := cmpID(a, b); got != want {
				t.Fatalf("cmpID(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func newTestQueue(t *testing.T, rdb redis.UniversalClient, prefix string, tweak func(*Options)) *Queue {
	t.Helper()
	testenv.DropPrefix(t, rdb, prefix)
	o := Options{Prefix: prefix, Consumer: "c1", Block: 20 * time.Millisecond}
	if tweak != nil {
		tweak(&o)
	}
	q, err := New(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func order(t *testing.T, id int, vid domain.VoucherID) domain.VoucherOrder {
	t.Helper()
	o, err := domain.NewVoucherOrder(domain.OrderID(id), domain.UserID(id), vid)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// receiveNothing lets Receive run its loop (discovery, collection, claims)
// for d and expects it to find nothing.
func receiveNothing(t *testing.T, q *Queue, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if ds, err := q.Receive(ctx, 10); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("receive: %v, %v; want nothing until the deadline", ds, err)
	}
}

func TestReadsEveryStreamWhetherKeysAreShardedOrNot(t *testing.T) {
	for _, b := range testenv.Redises() {
		for _, sharded := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sharded_%v", b.Name, sharded), func(t *testing.T) {
				rdb := b.Client(t)
				if _, cluster := rdb.(*redis.ClusterClient); cluster && !sharded {
					t.Skip("a cluster always reads stream by stream: one XREADGROUP of several slots is CROSSSLOT")
				}
				q := newTestQueue(t, rdb, testenv.KeyPrefix(t), nil)
				q.perStream = sharded // what a ClusterClient gets
				var want []domain.VoucherOrder
				for i := 1; i <= 30; i++ {
					o := order(t, i, domain.VoucherID(1+i%3))
					if err := q.Publish(context.Background(), o); err != nil {
						t.Fatal(err)
					}
					want = append(want, o)
				}
				got := testenv.ReceiveN(t, q, 30, 4)
				// Per voucher, stream order; across vouchers, any interleaving.
				per := map[domain.VoucherID][]domain.OrderID{}
				for _, d := range got {
					per[d.Order.VoucherID()] = append(per[d.Order.VoucherID()], d.Order.ID())
				}
				wantPer := map[domain.VoucherID][]domain.OrderID{}
				for _, o := range want {
					wantPer[o.VoucherID()] = append(wantPer[o.VoucherID()], o.ID())
				}
				if fmt.Sprint(per) != fmt.Sprint(wantPer) {
					t.Fatalf("per voucher got %v, want %v", per, wantPer)
				}
				if err := q.Ack(context.Background(), got); err != nil {
					t.Fatal(err)
				}

				// A group destroyed by hand is made again, and a new entry
				// behind it is delivered.
				key := redisschema.KeysFor(q.opts.Prefix, 2).Orders
				if err := rdb.XGroupDestroy(context.Background(), key, DefaultGroup).Err(); err != nil {
					t.Fatal(err)
				}
				late := order(t, 99, 2)
				if err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: key, Values: redisschema.EncodeOrder(late)}).Err(); err != nil {
					t.Fatal(err)
				}
				if ds := testenv.ReceiveN(t, q, 1, 4); ds[0].Order != late {
					t.Fatalf("after the group was destroyed got %v, want %v", ds[0].Order, late)
				}
			})
		}
	}
}

// ack.lua trusts its two bounds to say how far the stream may be trimmed, so
// bounds that are not two stream IDs in ascending order (which finish never
// sends) are refused and delete nothing.
func TestAckScriptRefusesBoundsThatAreNotTwoIDsInOrder(t *testing.T) {
	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			ctx := context.Background()
			key := redisschema.KeysFor(testenv.KeyPrefix(t), 7).Orders
			testenv.DropPrefix(t, rdb, testenv.KeyPrefix(t))
			if err := rdb.XGroupCreateMkStream(ctx, key, DefaultGroup, "0").Err(); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for i := 1; i <= 5; i++ {
				id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: redisschema.EncodeOrder(order(t, i, 7))}).Result()
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: DefaultGroup, Consumer: "c1",
				Streams: []string{key, ">"}, Count: 10, Block: -1}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.XAck(ctx, key, DefaultGroup, ids...).Err(); err != nil {
				t.Fatal(err)
			}
			for _, bounds := range [][2]string{{ids[3], ids[1]}, {"junk", ids[4]}, {ids[0], "1-01"}, {"01-1", ids[4]}} {
				err := ackScript.Eval(ctx, rdb, []string{key}, DefaultGroup, bounds[0], bounds[1]).Err()
				if err == nil || !strings.Contains(err.Error(), "not two stream IDs in order") {
					t.Fatalf("bounds %v: got %v, want a refusal", bounds, err)
				}
			}
			if n, err := rdb.XLen(ctx, key).Result(); err != nil || n != 5 {
				t.Fatalf("stream holds %d entries (%v), want all 5", n, err)
			}
		})
	}
}

// An ack out of order deletes, between its smallest and largest ID, exactly
// the entries no longer pending: not another consumer's entries read in
// between, nor the older pending one, nor what is not yet delivered.
func TestAckOutOfOrderKeepsOtherConsumersEntriesInItsRange(t *testing.T) {
	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			ctx := context.Background()
			prefix := testenv.KeyPrefix(t)
			key := redisschema.KeysFor(prefix, 7).Orders
			testenv.DropPrefix(t, rdb, prefix)
			q, err := New(rdb, Options{Prefix: prefix, Consumer: "c1"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = q.Close() })
			if err := rdb.XGroupCreateMkStream(ctx, key, DefaultGroup, "0").Err(); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for i := 1; i <= 7; i++ {
				id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: redisschema.EncodeOrder(order(t, i, 7))}).Result()
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			// c1 reads 1-2, c2 reads 3-4, c1 reads 5-6; 7 is not delivered.
			for _, r := range []struct {
				consumer string
				n        int64
			}{{"c1", 2}, {"c2", 2}, {"c1", 2}} {
				if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: DefaultGroup, Consumer: r.consumer,
					Streams: []string{key, ">"}, Count: r.n, Block: -1}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			// c1 finishes 5 and 2 (given out of order), 1 still pending.
			if err := q.finish(ctx, []entryRef{{key, ids[4]}, {key, ids[1]}}); err != nil {
				t.Fatal(err)
			}
			left, err := rdb.XRange(ctx, key, "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range left {
				got = append(got, m.ID)
			}
			want := []string{ids[0], ids[2], ids[3], ids[5], ids[6]}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("stream holds %v, want %v", got, want)
			}
			pending, err := rdb.XPending(ctx, key, DefaultGroup).Result()
			if err != nil || pending.Count != 4 {
				t.Fatalf("pending %+v (%v), want 4: 1, 3, 4 and 6", pending, err)
			}
		})
	}
}

// The deletion runs by EVALSHA inside the ack's transaction; a server that
// has not cached the script (just started, SCRIPT FLUSH) has the XACK done
// and the deletion run right after, so nothing acked stays in the stream.
// The server is made to answer NOSCRIPT by a hook that sends the ack's
// EVALSHA a hash no script has (a SCRIPT FLUSH would hit the other packages'
// tests on the shared server).
func TestAckDeletesItsEntriesOnAServerWithoutTheScript(t *testing.T) {
	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			unknown := &unknownAckScript{}
			rdb.AddHook(unknown)
			q := newTestQueue(t, rdb, testenv.KeyPrefix(t), nil)
			ctx := context.Background()
			for i := 1; i <= 3; i++ {
				if err := q.Publish(ctx, order(t, i, 7)); err != nil {
					t.Fatal(err)
				}
			}
			ds := testenv.ReceiveN(t, q, 3, 10)
			if err := q.Ack(ctx, ds); err != nil {
				t.Fatal(err)
			}
			if !unknown.done.Load() {
				t.Fatal("the ack sent no EVALSHA of ack.lua")
			}
			key := redisschema.KeysFor(q.opts.Prefix, 7).Orders
			if n, err := rdb.XLen(ctx, key).Result(); err != nil || n != 0 {
				t.Fatalf("stream holds %d entries (%v) after the ack, want 0", n, err)
			}
			if p, err := rdb.XPending(ctx, key, DefaultGroup).Result(); err != nil || p.Count != 0 {
				t.Fatalf("pending %+v (%v), want none", p, err)
			}
		})
	}
}

// unknownAckScript swaps, once, the hash of ack.lua's EVALSHA in a pipeline
// for one no script has.
type unknownAckScript struct{ done atomic.Bool }

func (*unknownAckScript) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*unknownAckScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *unknownAckScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if args := c.Args(); c.Name() == "evalsha" && len(args) > 1 && args[1] == ackScript.Hash() && !h.done.Load() {
				args[1] = strings.Repeat("f", 40)
				h.done.Store(true)
			}
		}
		return next(ctx, cmds)
	}
}

func TestAnEntryReadButNeverHandedOutIsClaimedBack(t *testing.T) {
	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			q := newTestQueue(t, rdb, testenv.KeyPrefix(t), func(o *Options) {
				o.MinIdle, o.ClaimInterval = 50*time.Millisecond, 10*time.Millisecond
			})
			ctx := context.Background()
			first := order(t, 1, 7)
			if err := q.Publish(ctx, first); err != nil {
				t.Fatal(err)
			}
			ds := testenv.ReceiveN(t, q, 1, 10)
			if err := q.Ack(ctx, ds); err != nil {
				t.Fatal(err)
			}
			// A read whose reply was lost: Redis counts the entry delivered to
			// c1, but no Receive ever returned it.
			lost := order(t, 2, 7)
			key := redisschema.KeysFor(q.opts.Prefix, 7).Orders
			if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: redisschema.EncodeOrder(lost)}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: DefaultGroup, Consumer: "c1",
				Streams: []string{key, ">"}, Count: 10, Block: -1}).Err(); err != nil {
				t.Fatal(err)
			}
			got := testenv.ReceiveN(t, q, 1, 10)
			if got[0].Order != lost || got[0].Attempts != 2 {
				t.Fatalf("got %v attempts %d, want %v attempts 2", got[0].Order, got[0].Attempts, lost)
			}
		})
	}
}

func TestFinishedStreamsOfGoneVouchersAreCollected(t *testing.T) {
	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			ctx := context.Background()
			q := newTestQueue(t, rdb, testenv.KeyPrefix(t), nil)
			q.discoverEvery, q.collectEvery = 0, 0 // on every read
			keys := func(vid domain.VoucherID) redisschema.Keys { return redisschema.KeysFor(q.opts.Prefix, vid) }
			const (
				finished  domain.VoucherID = 1 // gate gone, every entry acked: collected
				unacked   domain.VoucherID = 2 // gate gone, an entry held: kept
				undeliv   domain.VoucherID = 3 // gate gone, registered by another producer, never read: kept until read
				selling   domain.VoucherID = 4 // gate hash present, stream empty: kept
				forgotten domain.VoucherID = 5 // in the live set, no keys at all: never registered
			)
			if err := rdb.HSet(ctx, keys(selling).Voucher, "stock", 1).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.SAdd(ctx, keys(0).Live, int64(selling), int64(forgotten)).Err(); err != nil {
				t.Fatal(err)
			}
			for _, vid := range []domain.VoucherID{finished, unacked, selling} {
				if err := q.Publish(ctx, order(t, int(vid), vid)); err != nil {
					t.Fatal(err)
				}
			}
			ds := testenv.ReceiveN(t, q, 3, 10)
			// Another producer's stream appears only now.
			if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys(undeliv).Orders, Values: redisschema.EncodeOrder(order(t, 3, undeliv))}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.SAdd(ctx, q.registry, int64(undeliv)).Err(); err != nil {
				t.Fatal(err)
			}
			var hold []ports.Delivery
			for _, d := range ds {
				if d.Order.VoucherID() == unacked {
					hold = append(hold, d)
				} else if err := q.Ack(ctx, []ports.Delivery{d}); err != nil {
					t.Fatal(err)
				}
			}
			// The collection runs before each read: the undelivered entry
			// survives it and is read.
			late := testenv.ReceiveN(t, q, 1, 10)
			if late[0].Order.VoucherID() != undeliv {
				t.Fatalf("got %v, want the other producer's order", late[0].Order)
			}
			receiveNothing(t, q, 100*time.Millisecond)

			registered := func() string {
				m, err := rdb.SMembers(ctx, q.registry).Result()
				if err != nil {
					t.Fatal(err)
				}
				sort.Strings(m)
				return strings.Join(m, ",")
			}
			exists := func(vid domain.VoucherID) int64 {
				n, err := rdb.Exists(ctx, keys(vid).Orders).Result()
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			if got := registered(); got != "2,3,4" {
				t.Fatalf("registry %s, want 2,3,4 (the finished one collected, the live one without keys never added)", got)
			}
			if exists(finished) != 0 || exists(unacked) != 1 || exists(undeliv) != 1 || exists(selling) != 1 {
				t.Fatalf("streams exist: finished %d unacked %d undelivered %d selling %d; want 0 1 1 1",
					exists(finished), exists(unacked), exists(undeliv), exists(selling))
			}

			if err := q.Ack(ctx, append(hold, late...)); err != nil {
				t.Fatal(err)
			}
			// Collection runs with discovery, between reads: let Receive run
			// until it has (a loaded machine may take more than one pass).
			testenv.Eventually(t, 10*time.Second, func() (bool, string) {
				receiveNothing(t, q, 50*time.Millisecond)
				got := registered()
				return got == "4", fmt.Sprintf("registry %s, want only the voucher still selling", got)
			})
			if exists(unacked) != 0 || exists(undeliv) != 0 {
				t.Fatal("finished streams of gone vouchers were not deleted")
			}

			// A publish to a collected voucher brings its stream back.
			again := order(t, 11, finished)
			if err := q.Publish(ctx, again); err != nil {
				t.Fatal(err)
			}
			if ds := testenv.ReceiveN(t, q, 1, 10); ds[0].Order != again {
				t.Fatalf("got %v, want %v", ds[0].Order, again)
			}
		})
	}
}

// BenchmarkReceiveAck measures draining a backlog the way the worker does:
// batches of 200, each acked (ack.lua) before the next, by one consumer or by
// two on one Queue (the service's default of two workers). It runs on
// SECKILL_TEST_REDIS_URL when set, on miniredis otherwise.
func BenchmarkReceiveAck(b *testing.B) {
	for _, consumers := range []int{1, 2} {
		b.Run(fmt.Sprintf("consumers=%d", consumers), func(b *testing.B) { benchReceiveAck(b, consumers) })
	}
}

func benchReceiveAck(b *testing.B, consumers int) {
	var rdb redis.UniversalClient
	if testenv.CI() || os.Getenv(testenv.RedisEnv) != "" {
		rdb = testenv.RealRedis(b)
	} else {
		_, rdb = testenv.MiniRedis(b)
	}
	prefix := testenv.KeyPrefix(b)
	q, err := New(rdb, Options{Prefix: prefix, Consumer: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = q.Close()
		ctx := context.Background()
		_ = rdb.Del(ctx, redisschema.KeysFor(prefix, 7).Orders, q.registry).Err()
	}()
	ctx := context.Background()
	key := redisschema.KeysFor(prefix, 7).Orders
	pipe := rdb.Pipeline()
	for i := 1; i <= b.N; i++ {
		o, _ := domain.NewVoucherOrder(domain.OrderID(i), domain.UserID(i), 7)
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: redisschema.EncodeOrder(o)})
		if i%1000 == 0 || i == b.N {
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := rdb.SAdd(ctx, q.registry, 7).Err(); err != nil {
		b.Fatal(err)
	}
	// finished ends a consumer waiting for entries the other one took.
	finished, finish := context.WithCancel(ctx)
	defer finish()
	var (
		mu   sync.Mutex
		done int
		wg   sync.WaitGroup
	)
	errs := make(chan error, consumers)
	b.ResetTimer()
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ds, err := q.Receive(finished, 200)
				if finished.Err() != nil {
					return
				}
				if err == nil {
					err = q.Ack(ctx, ds)
				}
				if err != nil {
					errs <- err
					finish()
					return
				}
				mu.Lock()
				if done += len(ds); done >= b.N {
					finish()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
	if n, _ := q.rdb.XLen(ctx, redisschema.KeysFor(q.opts.Prefix, 7).Orders).Result(); n != 0 {
		b.Fatalf("%d entries left", n)
	}
}

// A stream's states follow the diagram in queue.go: the own leftovers are
// re-read only the first time its group is made, never after a lost group.
func TestStreamStates(t *testing.T) {
	s := &stream{state: stateNew, claimFrom: "0-0", nextClaim: time.Now().Add(time.Hour)}
	step := func(what string, f func(), want streamState, grouped bool) {
		t.Helper()
		f()
		if s.state != want || s.grouped() != grouped {
			t.Fatalf("after %s: state %d (grouped %v), want %d (grouped %v)", what, s.state, s.grouped(), want, grouped)
		}
	}
	step("group made", s.groupMade, stateRecovering, true)
	if s.cursor != "0" || !s.nextClaim.IsZero() {
		t.Fatalf("recovering from %q, next claim %v; want from 0, a claim due at once", s.cursor, s.nextClaim)
	}
	step("recovered", s.recovered, stateReading, true)
	step("group lost", s.groupLost, stateLostGroup, false)
	step("group made again", s.groupMade, stateReading, true)
	step("drain of an empty stream", func() { s.drainUpTo("") }, stateDrained, true)

	s = &stream{state: stateReading}
	step("drain", func() { s.drainUpTo("5-0") }, stateDraining, true)
	if s.drainTo != "5-0" {
		t.Fatalf("draining to %q, want 5-0", s.drainTo)
	}
	step("drained", s.drained, stateDrained, true)
}

// A read of new entries that comes back short keeps its batch open for the
// linger, as the channel queue does: what is published meanwhile joins it. A
// full read is handed out at once, so a backlog is not slowed down.
func TestAShortReadKeepsItsBatchOpenForTheLinger(t *testing.T) {
	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			const linger = 500 * time.Millisecond
			q := newTestQueue(t, rdb, testenv.KeyPrefix(t), func(o *Options) { o.Linger = linger })
			var (
				waits    atomic.Int64
				lingered = make(chan time.Duration, 1)
				release  = make(chan time.Time)
			)
			q.after = func(d time.Duration) <-chan time.Time {
				waits.Add(1)
				lingered <- d
				return release
			}
			ctx := context.Background()
			publish := func(ids ...int) {
				t.Helper()
				for _, id := range ids {
					if err := q.Publish(ctx, order(t, id, 7)); err != nil {
						t.Fatal(err)
					}
				}
			}
			ids := func(ds []ports.Delivery) []int64 {
				out := make([]int64, len(ds))
				for i, d := range ds {
					out[i] = int64(d.Order.ID())
				}
				return out
			}

			publish(1)
			type result struct {
				ds  []ports.Delivery
				err error
			}
			got := make(chan result, 1)
			go func() {
				ds, err := q.Receive(ctx, 10)
				got <- result{ds, err}
			}()
			select {
			case d := <-lingered:
				if d <= 0 || d > linger {
					t.Fatalf("lingered %s, want within (0, %s]", d, linger)
				}
			case r := <-got:
				t.Fatalf("a short read was handed out without lingering: %v, %v", ids(r.ds), r.err)
			case <-time.After(10 * time.Second):
				t.Fatal("a short read neither lingered nor came back")
			}
			publish(2, 3)
			close(release)
			r := <-got
			if r.err != nil {
				t.Fatal(r.err)
			}
			if got := ids(r.ds); !slices.Equal(got, []int64{1, 2, 3}) {
				t.Fatalf("after the linger got orders %v, want 1, 2 and 3 in one batch", got)
			}
			if err := q.Ack(ctx, r.ds); err != nil {
				t.Fatal(err)
			}

			// Full reads are handed out at once.
			publish(4, 5, 6, 7)
			before := waits.Load()
			for _, want := range [][]int64{{4, 5}, {6, 7}} {
				ds, err := q.Receive(ctx, 2)
				if err != nil {
					t.Fatal(err)
				}
				if got := ids(ds); !slices.Equal(got, want) {
					t.Fatalf("a full read got orders %v, want %v", got, want)
				}
				if err := q.Ack(ctx, ds); err != nil {
					t.Fatal(err)
				}
			}
			if n := waits.Load() - before; n != 0 {
				t.Fatalf("full reads lingered %d times, want none", n)
			}
		})
	}
}
