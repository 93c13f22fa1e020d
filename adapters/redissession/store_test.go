package redissession_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The Sessions contract is proven in test/contract, the cache's promises in
// sessions_test.go and cache_test.go; these tests pin compatibility with the
// original's hash, read by a request's lookup (the cache's miss, or every
// request with NoCache).

// uncached is Sessions without a cache: each UserID is a request's lookup.
func uncached(t *testing.T, rdb redis.UniversalClient, o redissession.Options) *redissession.Sessions {
	t.Helper()
	s, err := redissession.NewSessions(context.Background(), rdb, redissession.New(rdb, o), redissession.CacheOptions{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestUserIDReadsASessionTheOriginalWrote(t *testing.T) {
	m, rdb := testenv.MiniRedis(t)
	m.HSet("login:token:4b1c2f", "id", "1010", "nickName", "小鱼同学", "icon", "/imgs/icons/user5-icon.png")
	s := uncached(t, rdb, redissession.Options{})
	if got, err := s.UserID(context.Background(), "4b1c2f"); err != nil || got != 1010 {
		t.Fatalf("UserID = %d, %v; want 1010", got, err)
	}
}

func TestUserIDRefusesSessionsWithoutAValidID(t *testing.T) {
	cases := []struct {
		name   string
		fields []string
	}{
		{"not_a_number", []string{"id", "abc"}},
		{"zero", []string{"id", "0"}},
		{"negative", []string{"id", "-3"}},
		{"no_id_field", []string{"nickName", "x"}},
	}
	m, rdb := testenv.MiniRedis(t)
	s := uncached(t, rdb, redissession.Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m.HSet("login:token:"+tc.name, tc.fields...)
			if _, err := s.UserID(context.Background(), tc.name); !errors.Is(err, ports.ErrUnknownToken) {
				t.Fatalf("UserID: %v, want ErrUnknownToken", err)
			}
		})
	}
	t.Run("oversized_token", func(t *testing.T) {
		if _, err := s.UserID(context.Background(), strings.Repeat("a", 1000)); !errors.Is(err, ports.ErrUnknownToken) {
			t.Fatalf("UserID: %v, want ErrUnknownToken", err)
		}
	})
}

// A Redis failure must not read as "unknown token": that would turn an outage
// into 401s that send users to log in again.
func TestUserIDReportsRedisFailuresAsErrors(t *testing.T) {
	m, rdb := testenv.MiniRedis(t)
	s := uncached(t, rdb, redissession.Options{})
	m.SetError("ERR injected failure")
	_, err := s.UserID(context.Background(), "abc")
	if err == nil || errors.Is(err, ports.ErrUnknownToken) {
		t.Fatalf("UserID during a Redis failure: %v, want an infrastructure error", err)
	}
}

func TestMintWritesTheOriginalsFieldsWithTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		want time.Duration
	}{
		{"default_ttl", 0, 30 * time.Minute},
		{"configured_ttl", 5 * time.Minute, 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, rdb := testenv.MiniRedis(t)
			s := redissession.New(rdb, redissession.Options{TTL: tc.ttl})
			token, err := s.Mint(context.Background(), 42)
			if err != nil {
				t.Fatal(err)
			}
			key := "login:token:" + token
			if got := m.HGet(key, "id"); got != "42" {
				t.Fatalf("id = %q, want 42", got)
			}
			if got := m.HGet(key, "nickName"); got != "user_42" {
				t.Fatalf("nickName = %q, want user_42", got)
			}
			if fields, err := m.HKeys(key); err != nil || len(fields) != 3 {
				t.Fatalf("session hash fields = %v (%v), want id, nickName, icon", fields, err)
			}
			if ttl := m.TTL(key); ttl != tc.want {
				t.Fatalf("TTL = %s, want %s", ttl, tc.want)
			}
		})
	}
}

// Without the cache (a session cache TTL of 0) and without the automatic
// pipeliner (auto-pipelining off) a lookup slides the expiry
// itself, before it answers, as the original does per request; a session
// well within its slack is not written.
func TestUserIDWithRefreshSlidesALapsingSession(t *testing.T) {
	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := b.Client(t)
			prefix := testenv.KeyPrefix(t) + "login:token:"
			store := redissession.New(rdb, redissession.Options{Prefix: prefix})
			s := uncached(t, rdb, redissession.Options{Prefix: prefix})
			lapsing, err := store.Mint(ctx, 7)
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := store.Mint(ctx, 8)
			if err != nil {
				t.Fatal(err)
			}
			if err := rdb.Expire(ctx, prefix+lapsing, 5*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
			// Within the slack: a TTL a little short of 30 minutes stays.
			if err := rdb.Expire(ctx, prefix+fresh, 30*time.Minute-2*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
			for token, user := range map[string]int64{lapsing: 7, fresh: 8} {
				if got, err := s.UserID(ctx, token); err != nil || int64(got) != user {
					t.Fatalf("UserID = %d, %v; want %d", got, err, user)
				}
			}
			if ttl := rdb.TTL(ctx, prefix+lapsing).Val(); ttl < 29*time.Minute {
				t.Fatalf("lapsing session's TTL after a lookup = %s, want it back to 30m", ttl)
			}
			if ttl := rdb.TTL(ctx, prefix+fresh).Val(); ttl > 30*time.Minute-2*time.Second {
				t.Fatalf("fresh session's TTL after a lookup = %s: it was written within the slack", ttl)
			}
		})
	}
}

// TestUserIDGivesUpAfterWait: a Redis that takes the connection and never
// answers (a stalled master) is given up on at Options.Wait, with a deadline
// error, by a client that has no timeout of its own and a caller whose
// context has none either: the session lookup must not hold a claim past it.
// Two concurrent lookups both end (whether they share a slot's deadline is
// application's TestClaimContextEndsWithinItsBudget).
func TestUserIDGivesUpAfterWait(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: muteListener(t).Addr().String(), Protocol: 2, DisableIdentity: true,
		ReadTimeout: -1, WriteTimeout: -1, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := uncached(t, rdb, redissession.Options{Wait: 50 * time.Millisecond})
	errs := make(chan error, 2)
	for _, token := range []string{"a", "b"} {
		go func() {
			_, err := s.UserID(context.Background(), token)
			errs <- err
		}()
	}
	for range 2 {
		select {
		case err := <-errs:
			// The client cuts its read at the context's deadline (i/o
			// timeout) or gives up waiting for the answer (context's).
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ports.ErrUnknownToken) {
				t.Fatalf("UserID on a Redis that never answers: %v, want a deadline error", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("UserID on a Redis that never answers is still waiting, long after Wait")
		}
	}
}

// muteListener is a Redis that does not answer (a stalled master, a node
// still starting): it accepts connections, reads nothing and answers
// nothing, until the test ends.
func muteListener(t *testing.T) net.Listener {
	t.Helper()
	return serveEach(t, func(c net.Conn) { t.Cleanup(func() { _ = c.Close() }) })
}

// serveEach listens on a loopback port until the test ends and hands each
// connection it accepts to handle, on the accepting goroutine.
func serveEach(t *testing.T, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handle(c)
		}
	}()
	return ln
}
