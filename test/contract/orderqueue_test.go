package contract_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/redisstream"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// queueAdapter describes one OrderQueue implementation and the behaviour it
// documents where adapters legitimately differ.
type queueAdapter struct {
	name string
	// new returns an empty queue holding at least capacity orders.
	new func(t *testing.T, capacity int) ports.OrderQueue
	// fullRefuses: Publish on a full buffer returns ErrQueueFull (a channel);
	// otherwise the queue has no practical bound (a stream).
	fullRefuses bool
}

func queueAdapters() []queueAdapter {
	return []queueAdapter{{
		name:        "channel",
		new:         func(t *testing.T, capacity int) ports.OrderQueue { return chanqueue.New(capacity, 2*time.Millisecond) },
		fullRefuses: true,
	}, {
		name: "stream_miniredis",
		new: func(t *testing.T, _ int) ports.OrderQueue {
			_, rdb := testenv.MiniRedis(t)
			return newStreamQueue(t, rdb)
		},
		fullRefuses: false,
	}, {
		name: "stream_redis",
		new: func(t *testing.T, _ int) ports.OrderQueue {
			return newStreamQueue(t, testenv.RealRedis(t))
		},
		fullRefuses: false,
	}, {
		name: "stream_redis_cluster",
		new: func(t *testing.T, _ int) ports.OrderQueue {
			return newStreamQueue(t, testenv.RedisCluster(t))
		},
		fullRefuses: false,
	}}
}

// newStreamQueue returns a stream queue under its own key prefix, closed and
// its keys deleted when the test ends; the short Block keeps tests quick.
func newStreamQueue(t *testing.T, rdb redis.UniversalClient) *redisstream.Queue {
	t.Helper()
	return newStreamQueueAt(t, rdb, testenv.KeyPrefix(t))
}

// newStreamQueueAt is a stream queue under the given key prefix, removed with
// its keys when the test ends.
func newStreamQueueAt(t *testing.T, rdb redis.UniversalClient, prefix string) *redisstream.Queue {
	t.Helper()
	testenv.DropPrefix(t, rdb, prefix)
	q, err := redisstream.New(rdb, redisstream.Options{Prefix: prefix, Consumer: "c1", Block: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func queueOrder(t *testing.T, n int) domain.VoucherOrder {
	t.Helper()
	o, err := domain.NewVoucherOrder(domain.OrderID(1000+n), domain.UserID(n), 7)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func queueReceiveAll(t *testing.T, q ports.OrderQueue, want, batch int) []ports.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []ports.Delivery
	for len(got) < want {
		ds, err := q.Receive(ctx, batch)
		if err != nil {
			t.Fatalf("receive after %d of %d: %v", len(got), want, err)
		}
		if len(ds) == 0 || len(ds) > batch {
			t.Fatalf("receive returned %d deliveries, want 1..%d", len(ds), batch)
		}
		if err := q.Ack(ctx, ds); err != nil {
			t.Fatalf("ack: %v", err)
		}
		got = append(got, ds...)
	}
	return got
}

func TestOrderQueueContract(t *testing.T) {
	for _, a := range queueAdapters() {
		t.Run(a.name, func(t *testing.T) {
			t.Run("publish_order_is_preserved_within_and_across_batches", func(t *testing.T) {
				q := a.new(t, 100)
				for i := 1; i <= 25; i++ {
					if err := q.Publish(context.Background(), queueOrder(t, i)); err != nil {
						t.Fatal(err)
					}
				}
				got := queueReceiveAll(t, q, 25, 10)
				if len(got) != 25 {
					t.Fatalf("got %d deliveries, want 25", len(got))
				}
				for i, d := range got {
					if want := queueOrder(t, i+1); d.Order != want {
						t.Fatalf("delivery %d is %v, want %v", i, d.Order, want)
					}
				}
			})

			t.Run("receive_waits_for_a_publish", func(t *testing.T) {
				q := a.new(t, 10)
				got := make(chan []ports.Delivery, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					ds, _ := q.Receive(ctx, 5)
					got <- ds
				}()
				if err := q.Publish(context.Background(), queueOrder(t, 1)); err != nil {
					t.Fatal(err)
				}
				ds := <-got
				if len(ds) != 1 || ds[0].Order != queueOrder(t, 1) {
					t.Fatalf("got %v, want the one published order", ds)
				}
			})

			t.Run("acked_deliveries_are_not_handed_out_again", func(t *testing.T) {
				q := a.new(t, 10)
				for i := 1; i <= 3; i++ {
					if err := q.Publish(context.Background(), queueOrder(t, i)); err != nil {
						t.Fatal(err)
					}
				}
				got := queueReceiveAll(t, q, 3, 10) // acks each batch
				for _, d := range got {
					if d.Attempts != 1 {
						t.Fatalf("first delivery of %v has Attempts %d, want 1", d.Order, d.Attempts)
					}
				}
				if err := q.Close(); err != nil {
					t.Fatal(err)
				}
				ds, err := q.Receive(context.Background(), 10)
				if !errors.Is(err, ports.ErrQueueClosed) || len(ds) != 0 {
					t.Fatalf("after acking everything: %v, %v; want nothing and ErrQueueClosed", ds, err)
				}
			})

			t.Run("receive_returns_when_ctx_ends", func(t *testing.T) {
				q := a.new(t, 10)
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				ds, err := q.Receive(ctx, 5)
				if !errors.Is(err, context.Canceled) || len(ds) != 0 {
					t.Fatalf("got %v, %v; want no deliveries and context.Canceled", ds, err)
				}
			})

			t.Run("close_refuses_publish_and_drains_the_rest", func(t *testing.T) {
				q := a.new(t, 10)
				for i := 1; i <= 3; i++ {
					if err := q.Publish(context.Background(), queueOrder(t, i)); err != nil {
						t.Fatal(err)
					}
				}
				if err := q.Close(); err != nil {
					t.Fatal(err)
				}
				if err := q.Publish(context.Background(), queueOrder(t, 9)); !errors.Is(err, ports.ErrQueueClosed) {
					t.Fatalf("publish after close: %v, want ErrQueueClosed", err)
				}
				got := queueReceiveAll(t, q, 3, 10)
				if len(got) != 3 {
					t.Fatalf("drained %d, want 3", len(got))
				}
				ds, err := q.Receive(context.Background(), 10)
				if !errors.Is(err, ports.ErrQueueClosed) || len(ds) != 0 {
					t.Fatalf("receive on closed, drained queue: %v, %v; want ErrQueueClosed", ds, err)
				}
				if err := q.Close(); err != nil {
					t.Fatalf("second close: %v", err)
				}
			})

			t.Run("full_buffer", func(t *testing.T) {
				q := a.new(t, 4)
				var full int
				for i := 1; i <= 6; i++ {
					err := q.Publish(context.Background(), queueOrder(t, i))
					switch {
					case errors.Is(err, ports.ErrQueueFull):
						full++
					case err != nil:
						t.Fatal(err)
					}
				}
				wantFull, wantKept := 0, 6
				if a.fullRefuses {
					wantFull, wantKept = 2, 4
				}
				if full != wantFull {
					t.Fatalf("%d publishes refused as full, want %d", full, wantFull)
				}
				// Whatever was accepted is delivered: a refused publish must
				// not have displaced an accepted one.
				got := queueReceiveAll(t, q, wantKept, 10)
				for i, d := range got {
					if d.Order != queueOrder(t, i+1) {
						t.Fatalf("delivery %d is %v, want order %d", i, d.Order, i+1)
					}
				}
			})

			t.Run("concurrent_publishers_and_close_lose_nothing_accepted", func(t *testing.T) {
				q := a.new(t, 10_000)
				var wg sync.WaitGroup
				var mu sync.Mutex
				accepted := map[domain.OrderID]bool{}
				start := make(chan struct{})
				for w := 0; w < 8; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						<-start
						for i := 0; i < 500; i++ {
							o := queueOrder(t, w*1000+i+1)
							if err := q.Publish(context.Background(), o); err == nil {
								mu.Lock()
								accepted[o.ID()] = true
								mu.Unlock()
							} else if !errors.Is(err, ports.ErrQueueClosed) {
								t.Errorf("publish: %v", err)
							}
						}
					}(w)
				}
				close(start)
				_ = q.Close() // races the publishers on purpose
				wg.Wait()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				received := map[domain.OrderID]bool{}
				for {
					ds, err := q.Receive(ctx, 100)
					if errors.Is(err, ports.ErrQueueClosed) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					for _, d := range ds {
						received[d.Order.ID()] = true
					}
				}
				if len(received) != len(accepted) {
					t.Fatalf("received %d orders, %d were accepted", len(received), len(accepted))
				}
				for id := range accepted {
					if !received[id] {
						t.Fatalf("accepted order %d was not delivered", id)
					}
				}
			})
		})
	}
}
