package redisstream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/adapters/redisstream"
	"github.com/hmdp-go/seckill/adapters/worker"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// What only the Redis Stream queue does, seen from outside (the behaviour
// every OrderQueue shares is in test/contract): restarts, takeovers, delivery
// counts, the dead letter, trimming and poison. Each case runs on miniredis
// and, when SECKILL_TEST_REDIS_URL names one, on real Redis, under its own key
// prefix.

// newStreamQueue returns a stream queue under prefix that is closed, and
// whose keys are deleted, when the test ends. The short Block keeps tests
// quick; MinIdle stays long unless a case is about takeovers.
func newStreamQueue(t *testing.T, rdb redis.UniversalClient, prefix, consumer string, tweak ...func(*redisstream.Options)) *redisstream.Queue {
	t.Helper()
	testenv.DropPrefix(t, rdb, prefix)
	o := redisstream.Options{Prefix: prefix, Consumer: consumer, Block: 20 * time.Millisecond}
	for _, f := range tweak {
		f(&o)
	}
	q, err := redisstream.New(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// queueOrder is the n-th order of streamVoucher.
func queueOrder(t *testing.T, n int) domain.VoucherOrder {
	t.Helper()
	o, err := domain.NewVoucherOrder(domain.OrderID(1000+n), domain.UserID(n), streamVoucher)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// streamQuickTakeover makes abandoned entries claimable within a test.
func streamQuickTakeover(o *redisstream.Options) {
	o.MinIdle = 50 * time.Millisecond
	o.ClaimInterval = 10 * time.Millisecond
}

type streamEnv struct {
	rdb    redis.UniversalClient
	prefix string
}

func (e streamEnv) queue(t *testing.T, consumer string, tweak ...func(*redisstream.Options)) *redisstream.Queue {
	t.Helper()
	return newStreamQueue(t, e.rdb, e.prefix, consumer, tweak...)
}

func (e streamEnv) keys(vid domain.VoucherID) redisschema.Keys {
	return redisschema.KeysFor(e.prefix, vid)
}

// xadd appends a raw entry, as the claim script (or a broken producer) would.
func (e streamEnv) xadd(t *testing.T, vid domain.VoucherID, fields ...any) string {
	t.Helper()
	id, err := e.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: e.keys(vid).Orders, Values: fields}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// xaddOrder appends an order the way the claim script writes it.
func (e streamEnv) xaddOrder(t *testing.T, o domain.VoucherOrder) string {
	t.Helper()
	return e.xadd(t, o.VoucherID(), redisschema.EncodeOrder(o)...)
}

// live puts the voucher in the gate's live set, as Preheat does.
func (e streamEnv) live(t *testing.T, vid domain.VoucherID) {
	t.Helper()
	if err := e.rdb.SAdd(context.Background(), e.keys(vid).Live, int64(vid)).Err(); err != nil {
		t.Fatal(err)
	}
}

func (e streamEnv) entryIDs(t *testing.T, vid domain.VoucherID) []string {
	t.Helper()
	msgs, err := e.rdb.XRange(context.Background(), e.keys(vid).Orders, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

func (e streamEnv) pendingCount(t *testing.T, vid domain.VoucherID) int64 {
	t.Helper()
	p, err := e.rdb.XPending(context.Background(), e.keys(vid).Orders, redisstream.DefaultGroup).Result()
	if err != nil {
		t.Fatal(err)
	}
	return p.Count
}

func (e streamEnv) deadLetters(t *testing.T) []redis.XMessage {
	t.Helper()
	msgs, err := e.rdb.XRange(context.Background(), e.prefix+"dead-letter", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func streamPublish(t *testing.T, q ports.OrderQueue, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		if err := q.Publish(context.Background(), queueOrder(t, i)); err != nil {
			t.Fatal(err)
		}
	}
}

// mustPending checks the voucher's unfinished entries: delivered and not
// acknowledged, or not delivered yet. Finished entries are deleted with their
// ack, so it is the stream's length.
func (e streamEnv) mustPending(t *testing.T, vid domain.VoucherID, want int64) {
	t.Helper()
	n, err := e.rdb.XLen(context.Background(), e.keys(vid).Orders).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("%d entries of voucher %d unfinished, want %d", n, vid, want)
	}
}

func streamRefs(ds []ports.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Ref
	}
	return out
}

const streamVoucher domain.VoucherID = 7

func TestStreamQueue(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, e streamEnv)
	}{
		{"pending_entries_are_re_read_first_after_a_restart", func(t *testing.T, e streamEnv) {
			q1 := e.queue(t, "c1")
			streamPublish(t, q1, 1, 5)
			held := testenv.ReceiveN(t, q1, 3, 3)
			for _, d := range held {
				if d.Attempts != 1 {
					t.Fatalf("first delivery has Attempts %d, want 1", d.Attempts)
				}
			}
			if err := q1.Close(); err != nil { // a stop without ack: the entries stay pending to c1
				t.Fatal(err)
			}

			q2 := e.queue(t, "c1")
			first := testenv.ReceiveN(t, q2, 3, 10)
			if fmt.Sprint(streamRefs(first)) != fmt.Sprint(streamRefs(held)) {
				t.Fatalf("after restart got %v first, want the pending %v", streamRefs(first), streamRefs(held))
			}
			for i, d := range first {
				if d.Order != held[i].Order || d.Attempts != 2 {
					t.Fatalf("re-read %d: %v attempts %d, want %v attempts 2", i, d.Order, d.Attempts, held[i].Order)
				}
			}
			rest := testenv.ReceiveN(t, q2, 2, 10)
			for i, d := range rest {
				if d.Order != queueOrder(t, 4+i) || d.Attempts != 1 {
					t.Fatalf("new entry %d: %v attempts %d, want order %d attempts 1", i, d.Order, d.Attempts, 4+i)
				}
			}
			if err := q2.Ack(context.Background(), append(first, rest...)); err != nil {
				t.Fatal(err)
			}
			e.mustPending(t, streamVoucher, 0)
		}},

		{"backlog_counts_unfinished_and_pending_entries_and_their_lag", func(t *testing.T, e streamEnv) {
			ctx := context.Background()
			q := e.queue(t, "c1")
			if b, err := q.Backlog(ctx, streamVoucher); err != nil || !b.Known || b.Length != 0 || b.Pending != 0 || b.Lag != 0 {
				t.Fatalf("backlog of an empty stream: %+v, %v", b, err)
			}
			streamPublish(t, q, 1, 5)
			held := testenv.ReceiveN(t, q, 2, 2)
			b, err := q.Backlog(ctx, streamVoucher)
			if err != nil || b.Length != 5 || b.Pending < 2 || b.Lag < 0 {
				t.Fatalf("backlog after 5 published, 2 received: %+v, %v", b, err)
			}
			if err := q.Ack(ctx, held); err != nil {
				t.Fatal(err)
			}
			if b, err = q.Backlog(ctx, streamVoucher); err != nil || b.Length != 3 {
				t.Fatalf("backlog after 2 acked: %+v, %v", b, err)
			}
			if o, err := q.Overview(ctx); err != nil || o.Kind != "stream" || o.DeadLetters != 0 {
				t.Fatalf("overview: %+v, %v", o, err)
			}
		}},

		{"close_right_after_a_new_vouchers_first_claims_drains_them", func(t *testing.T, e streamEnv) {
			// The queue has been running (and discovering) before the voucher
			// exists; its claims land, and the stop comes before the next
			// periodic discovery.
			q := e.queue(t, "c1")
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			if ds, err := q.Receive(ctx, 10); len(ds) != 0 || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("receive on an empty group: %v, %v", ds, err)
			}
			cancel()
			for i := 1; i <= 3; i++ {
				e.xaddOrder(t, queueOrder(t, i))
			}
			e.live(t, streamVoucher)
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			got := testenv.ReceiveN(t, q, 3, 10)
			if err := q.Ack(context.Background(), got); err != nil {
				t.Fatal(err)
			}
			if ds, err := q.Receive(context.Background(), 10); !errors.Is(err, ports.ErrQueueClosed) || len(ds) != 0 {
				t.Fatalf("after the drain: %v, %v; want ErrQueueClosed", ds, err)
			}
			e.mustPending(t, streamVoucher, 0)
		}},

		{"a_vanished_consumers_entries_are_claimed_after_min_idle", func(t *testing.T, e streamEnv) {
			ctx := context.Background()
			stream := e.keys(streamVoucher).Orders
			if err := e.rdb.XGroupCreateMkStream(ctx, stream, redisstream.DefaultGroup, "0").Err(); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 3; i++ {
				e.xaddOrder(t, queueOrder(t, i))
			}
			e.live(t, streamVoucher)
			// A consumer reads them and dies without a word.
			read, err := e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
				Group: redisstream.DefaultGroup, Consumer: "dead", Streams: []string{stream, ">"}, Count: 10, Block: -1,
			}).Result()
			if err != nil || len(read[0].Messages) != 3 {
				t.Fatalf("dead consumer read %v, %v", read, err)
			}

			q := e.queue(t, "c2", streamQuickTakeover)
			got := testenv.ReceiveN(t, q, 3, 10)
			for i, d := range got {
				if d.Order != queueOrder(t, i+1) || d.Attempts != 2 {
					t.Fatalf("claimed %d: %v attempts %d, want order %d attempts 2", i, d.Order, d.Attempts, i+1)
				}
			}
			if err := q.Ack(ctx, got); err != nil {
				t.Fatal(err)
			}
			if n := e.pendingCount(t, streamVoucher); n != 0 {
				t.Fatalf("%d entries still pending after the takeover was acked", n)
			}
			e.mustPending(t, streamVoucher, 0)
		}},

		{"a_living_consumers_slow_batch_is_not_taken_over_until_it_stops", func(t *testing.T, e streamEnv) {
			// Synchronised on what Redis shows, not on the scheduler: q2
			// waits a minute for an idle entry, and the test makes the held
			// entries look an hour idle (age), so whether q2 may take them
			// depends only on whether q1's renewal loop has reset them since.
			q1 := e.queue(t, "c1", streamQuickTakeover)
			q2 := e.queue(t, "c2", func(o *redisstream.Options) {
				o.MinIdle, o.ClaimInterval = time.Minute, 10*time.Millisecond
			})
			streamPublish(t, q1, 1, 5)
			held := testenv.ReceiveN(t, q1, 5, 5)
			stream := e.keys(streamVoucher).Orders
			pending := func() []redis.XPendingExt {
				p, err := e.rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{
					Stream: stream, Group: redisstream.DefaultGroup, Start: "-", End: "+", Count: 10,
				}).Result()
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			// age makes every held entry an hour idle, still c1's, its
			// delivery count kept: as if c1 had not touched it for that long.
			age := func() {
				args := []any{"XCLAIM", stream, redisstream.DefaultGroup, "c1", 0}
				for _, d := range held {
					args = append(args, strings.TrimPrefix(d.Ref, stream+"/"))
				}
				args = append(args, "IDLE", time.Hour.Milliseconds(), "RETRYCOUNT", 1, "JUSTID")
				if n, err := e.rdb.Do(context.Background(), args...).Slice(); err != nil || len(n) != len(held) {
					t.Fatalf("aging the held entries: %v, %v", n, err)
				}
			}

			// Three times over, the batch is overdue, q1 renews it, and q2
			// then claims nothing from it and counts no delivery.
			for round := 1; round <= 3; round++ {
				age()
				testenv.Eventually(t, 10*time.Second, func() (bool, string) {
					for _, x := range pending() {
						if x.Idle >= time.Minute {
							return false, fmt.Sprintf("round %d: %s idle %s, not renewed", round, x.ID, x.Idle)
						}
					}
					return true, ""
				})
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				ds, err := q2.Receive(ctx, 10)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) || len(ds) != 0 {
					t.Fatalf("round %d: q2 took %v (%v) from a living consumer", round, ds, err)
				}
				p := pending()
				if len(p) != len(held) {
					t.Fatalf("round %d: %d entries pending, want %d", round, len(p), len(held))
				}
				for _, x := range p {
					if x.Consumer != "c1" || x.RetryCount != 1 {
						t.Fatalf("round %d: held entry %s: consumer %s, deliveries %d; want c1, 1", round, x.ID, x.Consumer, x.RetryCount)
					}
				}
			}

			// q1 stops without acking (Close returns once its renewal has
			// stopped) and the batch is overdue again: now q2 takes it over.
			if err := q1.Close(); err != nil {
				t.Fatal(err)
			}
			age()
			got := testenv.ReceiveN(t, q2, 5, 10)
			for i, d := range got {
				if d.Ref != held[i].Ref || d.Attempts != 2 {
					t.Fatalf("taken over %d: %s attempts %d, want %s attempts 2", i, d.Ref, d.Attempts, held[i].Ref)
				}
			}
			if err := q2.Ack(context.Background(), got); err != nil {
				t.Fatal(err)
			}
			e.mustPending(t, streamVoucher, 0)
		}},

		{"entries_delivered_more_than_n_times_come_with_attempts_above_n", func(t *testing.T, e streamEnv) {
			const n = 3
			for i := 1; i <= n+1; i++ {
				q := e.queue(t, "c1")
				if i == 1 {
					streamPublish(t, q, 1, 1)
				}
				ds := testenv.ReceiveN(t, q, 1, 10)
				if ds[0].Attempts != i {
					t.Fatalf("delivery %d has Attempts %d", i, ds[0].Attempts)
				}
				if err := q.Close(); err != nil { // dies on it, again
					t.Fatal(err)
				}
			}
			if got := e.pendingCount(t, streamVoucher); got != 1 {
				t.Fatalf("%d pending, want the one entry", got)
			}
		}},

		{"the_worker_dead_letters_an_entry_delivered_too_often", func(t *testing.T, e streamEnv) {
			ctx := context.Background()
			vouchers := memory.NewVouchers()
			sale, err := domain.NewSale(10, testenv.WallClock{}.Now().Add(-time.Hour), testenv.WallClock{}.Now().Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "w"}, sale)
			if err != nil {
				t.Fatal(err)
			}
			if v, err = vouchers.AddSeckill(ctx, v); err != nil {
				t.Fatal(err)
			}
			orders := memory.NewOrders(vouchers)
			o, err := domain.NewVoucherOrder(4242, 9, v.ID())
			if err != nil {
				t.Fatal(err)
			}
			const maxDeliveries = 2
			for i := 1; i <= maxDeliveries; i++ { // two consumers died on it
				q := e.queue(t, "c1")
				if i == 1 {
					if err := q.Publish(ctx, o); err != nil {
						t.Fatal(err)
					}
				}
				testenv.ReceiveN(t, q, 1, 10)
				_ = q.Close()
			}

			q := e.queue(t, "c1")
			w := worker.New(q, application.NewFulfillOrders(orders, memory.NewGate(testenv.WallClock{})),
				zerolog.Nop(), worker.Options{MaxDeliveries: maxDeliveries})
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			testenv.Eventually(t, 10*time.Second, func() (bool, string) {
				n := len(e.deadLetters(t))
				return n == 1, fmt.Sprintf("%d dead letters", n)
			})
			_ = q.Close()
			if err := <-done; err != nil {
				t.Fatalf("worker: %v", err)
			}
			dl := e.deadLetters(t)[0].Values
			if dl["reason"] != string(domain.FailUndeliverable) || dl["deliveries"] != fmt.Sprint(maxDeliveries+1) || dl["id"] != "4242" {
				t.Fatalf("dead letter %v", dl)
			}
			st, err := orders.Find(ctx, o.ID())
			if err != nil || st.State != domain.OrderFailed || st.Reason != domain.FailUndeliverable {
				t.Fatalf("order recorded as %+v, %v; want failed undeliverable", st, err)
			}
			e.mustPending(t, v.ID(), 0)
		}},

		{"dead_letter_writes_the_dead_letter_stream_and_acks", func(t *testing.T, e streamEnv) {
			q := e.queue(t, "c1")
			streamPublish(t, q, 1, 2)
			ds := testenv.ReceiveN(t, q, 2, 10)
			if err := q.DeadLetter(context.Background(), ds, domain.FailUndeliverable); err != nil {
				t.Fatal(err)
			}
			dl := e.deadLetters(t)
			if len(dl) != 2 {
				t.Fatalf("%d dead letters, want 2", len(dl))
			}
			for i, m := range dl {
				o := ds[i].Order
				want := map[string]any{
					"id": fmt.Sprint(int64(o.ID())), "userId": fmt.Sprint(int64(o.UserID())), "voucherId": "7",
					"reason": "undeliverable", "stream": e.keys(streamVoucher).Orders,
					"entry": strings.TrimPrefix(ds[i].Ref, e.keys(streamVoucher).Orders+"/"), "deliveries": "1",
				}
				if fmt.Sprint(m.Values) != fmt.Sprint(want) {
					t.Fatalf("dead letter %d = %v, want %v", i, m.Values, want)
				}
			}
			if n := e.pendingCount(t, streamVoucher); n != 0 {
				t.Fatalf("%d still pending after DeadLetter", n)
			}
			e.mustPending(t, streamVoucher, 0)
			if o, err := q.Overview(context.Background()); err != nil || o.DeadLetters != 2 {
				t.Fatalf("Overview().DeadLetters = %d, %v; want 2", o.DeadLetters, err)
			}
		}},

		{"trimming_removes_acked_entries_and_keeps_every_unacked_one", func(t *testing.T, e streamEnv) {
			ctx := context.Background()
			q := e.queue(t, "c1")
			streamPublish(t, q, 1, 10)
			ds := testenv.ReceiveN(t, q, 10, 10)
			var acked, kept []ports.Delivery
			for i, d := range ds {
				if i%2 == 0 {
					acked = append(acked, d)
				} else {
					kept = append(kept, d)
				}
			}
			if err := q.Ack(ctx, acked); err != nil {
				t.Fatal(err)
			}
			streamPublish(t, q, 11, 13) // not delivered yet
			want := strings.Join(streamRefs(kept), " ")
			ids := e.entryIDs(t, streamVoucher)
			for _, id := range ids[len(kept):] {
				want += " " + e.keys(streamVoucher).Orders + "/" + id
			}
			var got []string
			for _, id := range ids {
				got = append(got, e.keys(streamVoucher).Orders+"/"+id)
			}
			if len(ids) != len(kept)+3 || strings.Join(got, " ") != want {
				t.Fatalf("stream holds %v, want the unacked %v and 3 undelivered", ids, streamRefs(kept))
			}
			e.mustPending(t, streamVoucher, 8)
			if err := q.Ack(ctx, ds); err != nil { // acking again is harmless
				t.Fatal(err)
			}
			rest := testenv.ReceiveN(t, q, 3, 10)
			if rest[0].Order != queueOrder(t, 11) {
				t.Fatalf("after acks got %v, want order 11 next", rest[0].Order)
			}
			if err := q.Ack(ctx, rest); err != nil {
				t.Fatal(err)
			}
			e.mustPending(t, streamVoucher, 0)
		}},

		// ack.lua trims below a bound instead of deleting each ID: the bound
		// must stop at the oldest entry still pending and right after the
		// largest acked one, comparing IDs as numbers (9-10 after 9-9, 10-1
		// after 9-10, 100-0 after 10-100), whatever the order of the acks.
		{"acks_in_any_order_delete_exactly_the_finished_entries", func(t *testing.T, e streamEnv) {
			ctx := context.Background()
			stream := e.keys(streamVoucher).Orders
			ids := []string{"9-9", "9-10", "10-1", "10-99", "10-100", "100-0", "100-1", "1000-0"}
			for i, id := range ids {
				err := e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: id, Values: redisschema.EncodeOrder(queueOrder(t, i+1))}).Err()
				if err != nil {
					t.Fatal(err)
				}
			}
			e.live(t, streamVoucher)
			q := e.queue(t, "c1")
			ds := testenv.ReceiveN(t, q, 6, 6)
			holds := func(want ...string) {
				t.Helper()
				if got := e.entryIDs(t, streamVoucher); strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("stream holds %v, want %v", got, want)
				}
				e.mustPending(t, streamVoucher, int64(len(want)))
			}
			steps := []struct {
				ack  []ports.Delivery
				want []string
			}{
				{ds[3:6], []string{"9-9", "9-10", "10-1", "100-1", "1000-0"}}, // a later batch first
				{ds[1:2], []string{"9-9", "10-1", "100-1", "1000-0"}},         // 9-9 still pending
				{[]ports.Delivery{ds[2], ds[0]}, []string{"100-1", "1000-0"}}, // in any order
			}
			for _, s := range steps {
				if err := q.Ack(ctx, s.ack); err != nil {
					t.Fatal(err)
				}
				holds(s.want...)
			}
			rest := testenv.ReceiveN(t, q, 2, 10)
			if rest[0].Order != queueOrder(t, 7) || rest[1].Order != queueOrder(t, 8) || rest[0].Attempts != 1 {
				t.Fatalf("after the acks got %v, want the two undelivered orders 7 and 8", rest)
			}
			if err := q.Ack(ctx, rest[:1]); err != nil {
				t.Fatal(err)
			}
			holds("1000-0")
			if err := q.Ack(ctx, rest); err != nil { // again: harmless
				t.Fatal(err)
			}
			holds()
		}},

		// A group made anew (deleted by hand, or collected by another instance)
		// has delivered nothing: an ack from before must delete only its own
		// entries, not trim the older ones the new group has yet to deliver.
		{"an_ack_after_the_group_was_made_anew_deletes_only_its_entries", func(t *testing.T, e streamEnv) {
			ctx := context.Background()
			stream := e.keys(streamVoucher).Orders
			var ids []string
			for i := 1; i <= 4; i++ {
				ids = append(ids, e.xaddOrder(t, queueOrder(t, i)))
			}
			e.live(t, streamVoucher)
			q := e.queue(t, "c1")
			ds := testenv.ReceiveN(t, q, 3, 3)
			if err := e.rdb.XGroupDestroy(ctx, stream, redisstream.DefaultGroup).Err(); err != nil {
				t.Fatal(err)
			}
			if err := e.rdb.XGroupCreate(ctx, stream, redisstream.DefaultGroup, "0").Err(); err != nil {
				t.Fatal(err)
			}
			if err := q.Ack(ctx, ds[2:]); err != nil {
				t.Fatal(err)
			}
			if got, want := e.entryIDs(t, streamVoucher), []string{ids[0], ids[1], ids[3]}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("stream holds %v, want %v: only the acked entry deleted", got, want)
			}
		}},

		{"poison_goes_to_the_dead_letter_and_does_not_stall_the_entries_behind_it", func(t *testing.T, e streamEnv) {
			e.live(t, streamVoucher)
			first := e.xaddOrder(t, queueOrder(t, 1))
			poison := []string{
				e.xadd(t, streamVoucher, "id", "1002", "voucherId", "7"),                  // no userId
				e.xadd(t, streamVoucher, "id", "1003", "userId", "abc", "voucherId", "7"), // not a number
				e.xadd(t, streamVoucher, "id", "1004", "userId", "4", "voucherId", "8"),   // another voucher's
				e.xadd(t, streamVoucher, "id", "-1005", "userId", "5", "voucherId", "7"),  // not a valid order
				e.xadd(t, streamVoucher, "junk", "x"),                                     // nothing at all
			}
			last := e.xaddOrder(t, queueOrder(t, 6))
			var logs testenv.LogBuffer
			q := e.queue(t, "c1", func(o *redisstream.Options) { o.Log = zerolog.New(&logs) })

			got := testenv.ReceiveN(t, q, 2, 10)
			stream := e.keys(streamVoucher).Orders
			if got[0].Ref != stream+"/"+first || got[1].Ref != stream+"/"+last ||
				got[0].Order != queueOrder(t, 1) || got[1].Order != queueOrder(t, 6) {
				t.Fatalf("got %v, want the two good orders around the poison", got)
			}
			dl := e.deadLetters(t)
			if len(dl) != len(poison) {
				t.Fatalf("%d dead letters, want %d", len(dl), len(poison))
			}
			for i, m := range dl {
				if m.Values["reason"] != redisstream.ReasonUndecodable || m.Values["stream"] != stream || m.Values["entry"] != poison[i] {
					t.Fatalf("dead letter %d = %v, want entry %s undecodable", i, m.Values, poison[i])
				}
				if !strings.Contains(logs.String(), poison[i]) {
					t.Fatalf("no error log names poison entry %s:\n%s", poison[i], logs.String())
				}
			}
			if err := q.Ack(context.Background(), got); err != nil {
				t.Fatal(err)
			}
			e.mustPending(t, streamVoucher, 0)
		}},

		{"a_stream_written_before_the_group_exists_is_delivered_in_full", func(t *testing.T, e streamEnv) {
			for i := 1; i <= 5; i++ {
				e.xaddOrder(t, queueOrder(t, i))
			}
			e.live(t, streamVoucher)
			q := e.queue(t, "c1")
			got := testenv.ReceiveN(t, q, 5, 10)
			for i, d := range got {
				if d.Order != queueOrder(t, i+1) || d.Attempts != 1 {
					t.Fatalf("delivery %d: %v attempts %d, want order %d attempts 1", i, d.Order, d.Attempts, i+1)
				}
			}
		}},

		{"the_group_is_created_if_missing_and_busygroup_is_fine", func(t *testing.T, e streamEnv) {
			ctx := context.Background()
			if err := e.rdb.HSet(ctx, e.keys(streamVoucher).Voucher, "stock", 1).Err(); err != nil {
				t.Fatal(err)
			}
			e.live(t, streamVoucher)
			for _, c := range []string{"c1", "c2"} {
				q := e.queue(t, c)
				rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				ds, err := q.Receive(rctx, 10)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) || len(ds) != 0 {
					t.Fatalf("%s on an empty stream: %v, %v; want a timeout", c, ds, err)
				}
			}
			groups, err := e.rdb.XInfoGroups(ctx, e.keys(streamVoucher).Orders).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(groups) != 1 || groups[0].Name != redisstream.DefaultGroup {
				t.Fatalf("groups %+v, want the one %q", groups, redisstream.DefaultGroup)
			}
		}},

		{"two_consumers_split_the_entries_and_none_gets_one_twice", func(t *testing.T, e streamEnv) {
			const total = 200
			q1, q2 := e.queue(t, "c1"), e.queue(t, "c2")
			streamPublish(t, q1, 1, total)
			// Taking turns: each gets a batch of its own.
			a := testenv.ReceiveN(t, q1, 10, 10)
			b := testenv.ReceiveN(t, q2, 10, 10)
			seen := map[domain.OrderID]string{}
			var mu sync.Mutex
			note := func(who string, ds []ports.Delivery) {
				mu.Lock()
				defer mu.Unlock()
				for _, d := range ds {
					if prev, dup := seen[d.Order.ID()]; dup {
						t.Errorf("order %d delivered to %s and %s", d.Order.ID(), prev, who)
					}
					seen[d.Order.ID()] = who
				}
			}
			note("c1", a)
			note("c2", b)
			// Then both at once, acking as they go, until all are in.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			for _, w := range []struct {
				name string
				q    *redisstream.Queue
			}{{"c1", q1}, {"c2", q2}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						mu.Lock()
						n := len(seen)
						mu.Unlock()
						if n >= total {
							return
						}
						rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
						ds, err := w.q.Receive(rctx, 10)
						rcancel()
						if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
							continue
						}
						if err != nil {
							t.Errorf("%s: %v", w.name, err)
							return
						}
						note(w.name, ds)
						if err := w.q.Ack(ctx, ds); err != nil {
							t.Errorf("%s ack: %v", w.name, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if len(seen) != total {
				t.Fatalf("%d orders delivered, want %d", len(seen), total)
			}
			if err := q1.Ack(context.Background(), append(a, b...)); err != nil {
				t.Fatal(err)
			}
			e.mustPending(t, streamVoucher, 0)
		}},

		{"close_ends_a_waiting_receive_and_ack_still_works", func(t *testing.T, e streamEnv) {
			q := e.queue(t, "c1", func(o *redisstream.Options) { o.Block = 100 * time.Millisecond })
			streamPublish(t, q, 1, 1)
			inFlight := testenv.ReceiveN(t, q, 1, 10)
			errc := make(chan error, 1)
			go func() {
				_, err := q.Receive(context.Background(), 10)
				errc <- err
			}()
			start := time.Now()
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-errc:
				if !errors.Is(err, ports.ErrQueueClosed) {
					t.Fatalf("waiting receive ended with %v, want ErrQueueClosed", err)
				}
				if d := time.Since(start); d > time.Second {
					t.Fatalf("waiting receive took %s to see Close", d)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a waiting receive did not return after Close")
			}
			if err := q.Ack(context.Background(), inFlight); err != nil {
				t.Fatalf("ack after close: %v", err)
			}
			e.mustPending(t, streamVoucher, 0)
		}},

		{"receive_returns_promptly_when_ctx_ends_while_waiting", func(t *testing.T, e streamEnv) {
			q := e.queue(t, "c1", func(o *redisstream.Options) { o.Block = 100 * time.Millisecond })
			streamPublish(t, q, 1, 1)
			testenv.ReceiveN(t, q, 1, 10)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := q.Receive(ctx, 10)
				errc <- err
			}()
			cancel()
			start := time.Now()
			select {
			case err := <-errc:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("got %v, want context.Canceled", err)
				}
				if d := time.Since(start); d > time.Second {
					t.Fatalf("took %s to see the cancel", d)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("receive did not return after cancel")
			}
		}},

		{"orders_the_gate_enqueues_are_delivered", func(t *testing.T, e streamEnv) {
			ctx := context.Background()
			g := redisgate.New(e.rdb, redisgate.Options{Prefix: e.prefix})
			sale, err := domain.NewSale(3, testenv.WallClock{}.Now().Add(-time.Hour), testenv.WallClock{}.Now().Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "g"}, sale)
			if err != nil {
				t.Fatal(err)
			}
			v = v.WithID(31)
			if err := g.Preheat(ctx, v); err != nil {
				t.Fatal(err)
			}
			var want []domain.VoucherOrder
			for i := 1; i <= 3; i++ {
				o, err := domain.NewVoucherOrder(domain.OrderID(5000+i), domain.UserID(i), v.ID())
				if err != nil {
					t.Fatal(err)
				}
				if err := g.ReserveAndAppend(ctx, o); err != nil {
					t.Fatal(err)
				}
				want = append(want, o)
			}
			q := e.queue(t, "c1")
			got := testenv.ReceiveN(t, q, 3, 10)
			for i, d := range got {
				if d.Order != want[i] {
					t.Fatalf("delivery %d is %v, want %v", i, d.Order, want[i])
				}
			}
			if err := q.Ack(ctx, got); err != nil {
				t.Fatal(err)
			}
			e.mustPending(t, v.ID(), 0)
		}},

		{"orders_lists_the_pending_and_the_undelivered_not_the_finished", func(t *testing.T, e streamEnv) {
			// What reconcile counts as in flight, read by the gate
			// (ports.QueueBacklog): read-but-unacked and not-yet-read
			// entries; an acked one is gone, poison is no order.
			ctx := context.Background()
			q := e.queue(t, "c1")
			streamPublish(t, q, 1, 3)
			e.xadd(t, streamVoucher, "id", "x")
			streamPublish(t, q, 4, 5)
			held := testenv.ReceiveN(t, q, 2, 2)
			if err := q.Ack(ctx, held[:1]); err != nil {
				t.Fatal(err)
			}
			g := redisgate.New(e.rdb, redisgate.Options{Prefix: e.prefix})
			want := fmt.Sprint([]domain.VoucherOrder{queueOrder(t, 2), queueOrder(t, 3), queueOrder(t, 4), queueOrder(t, 5)})
			got, complete, err := g.Orders(ctx, streamVoucher, 100)
			if err != nil || !complete || fmt.Sprint(got) != want {
				t.Fatalf("Orders = %v, complete %v, %v; want %s, complete", got, complete, err, want)
			}
			if n, err := g.Pending(ctx, streamVoucher); err != nil || n != 5 {
				t.Fatalf("Pending = %d, %v; want 5 (the poison entry too, until it is dead-lettered)", n, err)
			}
		}},
	}

	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					rdb := b.Client(t)
					c.run(t, streamEnv{rdb: rdb, prefix: testenv.KeyPrefix(t)})
				})
			}
		})
	}
}
