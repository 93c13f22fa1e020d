package application_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// stalledRedis accepts connections and never answers: a Redis that hangs
// (a stop-the-world fork, a dead link that keeps its socket open).
// Its stop closes every connection, so the client's shutdown need not wait
// out its own read timeouts.
func stalledRedis(t *testing.T) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	stop = func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// A claim never waits past ClaimBudget, whichever Redis wait stalls, and a
// claim that ran out of time before anything could have been kept answers
// busy. The assertion is on the error: the claim returned, and said busy
// because its budget ran out, not because Redis refused.
func TestClaimAnswersBusyWithinItsBudgetWhenRedisStalls(t *testing.T) {
	clock := testenv.NewClock(time.Now())
	cases := []struct {
		name string
		ids  func(claims redis.UniversalClient, rdb redis.UniversalClient) ports.OrderIDs
	}{
		// The id lease is the first Redis wait of a claim.
		{"id_lease_stalls", func(claims, rdb redis.UniversalClient) ports.OrderIDs {
			return redisgate.NewIDs(rdb, redisgate.IDOptions{Leases: claims})
		}},
		// Ids in hand, the reserve stalls; the channel driver undoes it in
		// the background and answers busy.
		{"reserve_stalls", func(redis.UniversalClient, redis.UniversalClient) ports.OrderIDs {
			return memory.NewIDs(clock)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, stop := stalledRedis(t)
			rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			t.Cleanup(stop) // runs first
			claims, err := rdb.AsyncAutoPipeline()
			if err != nil {
				t.Fatal(err)
			}
			gate := redisgate.New(rdb, redisgate.Options{Claims: claims})
			queue := chanqueue.New(16, time.Millisecond)
			t.Cleanup(func() { _ = queue.Close() })
			claim := application.NewClaimSeckill(tc.ids(claims, rdb), chanqueue.NewAdmission(gate, queue))

			// The caller's context has no deadline: the budget alone must end it.
			start := time.Now()
			_, err = claim.Handle(context.Background(), 7, 1)
			t.Logf("answered after %s", time.Since(start))
			if !errors.Is(err, application.ErrBusy) {
				t.Fatalf("claim on a stalled Redis: %v, want ErrBusy", err)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("claim on a stalled Redis: %v, want it to end with its budget (DeadlineExceeded)", err)
			}
			var r *domain.Refusal
			if errors.As(err, &r) {
				t.Fatalf("a stall must not read as a refusal: %v", err)
			}
		})
	}
}
