package redissession_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// commands counts what one instance sends to Redis, but a new connection's
// handshake (the pipeliner opens one per node on first use).
type commands struct{ all atomic.Int64 }

func (c *commands) add(cmd redis.Cmder) {
	switch cmd.Name() {
	case "hello", "client", "auth", "select", "ping", "readonly":
	default:
		c.all.Add(1)
	}
}
func (c *commands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.add(cmd); return next(ctx, cmd) }
}
func (c *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.add(cmd)
		}
		return next(ctx, cmds)
	}
}

// instance is one service instance's sessions: its own Redis client (with
// its own automatic pipeliner, as in the service) and its own Tracked cache.
type instance struct {
	rdb      redis.UniversalClient
	sessions *redissession.Tracked
	store    *redissession.Store
	sent     *commands
}

func newInstance(t *testing.T, connect func(testing.TB) redis.UniversalClient, prefix string, period time.Duration) instance {
	t.Helper()
	rdb := connect(t)
	sent := &commands{}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		// The pipeliner sends through the node clients, whose hooks are
		// their own.
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(sent) })
		_ = cc.ForEachShard(context.Background(), func(_ context.Context, n *redis.Client) error {
			n.AddHook(sent)
			return nil
		})
	} else {
		rdb.AddHook(sent)
	}
	store := redissession.New(rdb, redissession.Options{Prefix: prefix, Lookups: testenv.AutoPipelined(t, rdb, true)})
	tr, err := redissession.NewTracked(context.Background(), rdb, store, redissession.TrackedOptions{Period: period})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return instance{rdb: rdb, sessions: tr, store: store, sent: sent}
}

// TestTrackedRevokesOnEveryInstance: a token both instances have cached
// (the second lookup on each costs no Redis) stops resolving on the other
// instance as soon as Redis reports the DEL; no cache TTL is waited out (the
// period here is an hour).
func TestTrackedRevokesOnEveryInstance(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			prefix := testenv.Unique("login:token:")
			ctx := context.Background()
			// Logged in before the instances listen: the login's own
			// report would otherwise race the first lookups (and, safely,
			// keep them from caching).
			token, err := redissession.New(b.Client(t), redissession.Options{Prefix: prefix}).Mint(ctx, 42)
			if err != nil {
				t.Fatal(err)
			}
			a := newInstance(t, b.Client, prefix, time.Hour)
			other := newInstance(t, b.Client, prefix, time.Hour)
			for _, in := range []instance{a, other} {
				if u, err := in.sessions.UserID(ctx, token); err != nil || u != 42 {
					t.Fatalf("first lookup: %d, %v", u, err)
				}
			}
			before := other.sent.all.Load()
			if u, err := other.sessions.UserID(ctx, token); err != nil || u != 42 {
				t.Fatalf("cached lookup: %d, %v", u, err)
			}
			if n := other.sent.all.Load() - before; n != 0 {
				t.Fatalf("a cached lookup sent %d commands, want 0", n)
			}

			if err := a.rdb.Del(ctx, prefix+token).Err(); err != nil {
				t.Fatal(err)
			}
			// The report travels on its own connection; the next request
			// after it arrives is refused (sub-millisecond on loopback).
			served := 0
			testenv.Eventually(t, 2*time.Second, func() (bool, string) {
				_, err := other.sessions.UserID(ctx, token)
				if errors.Is(err, ports.ErrUnknownToken) {
					return true, ""
				}
				served++
				return false, fmt.Sprintf("revoked token still resolves (%v)", err)
			})
			t.Logf("lookups served between the DEL's reply and its report: %d", served)
			if _, err := a.sessions.UserID(ctx, token); !errors.Is(err, ports.ErrUnknownToken) {
				t.Fatalf("revoked token on the deleting instance: %v, want ErrUnknownToken", err)
			}
		})
	}
}

// TestTrackedSlidesExpiryOncePerPeriod: a lookup that misses pushes a
// lapsing session's expiry back to its TTL in the same round trip (as hmdp's
// RefreshTokenInterceptor does per request); after that write's report, one
// more lookup (no write) and the requests that follow within the period
// cost nothing at all.
func TestTrackedSlidesExpiryOncePerPeriod(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			prefix := testenv.Unique("login:token:")
			ctx := context.Background()
			// The session is written before the instance starts listening,
			// so the only report it hears is its own EXPIRE's.
			setup := b.Client(t)
			token, err := redissession.New(setup, redissession.Options{Prefix: prefix}).Mint(ctx, 7)
			if err != nil {
				t.Fatal(err)
			}
			key := prefix + token
			// The session is about to lapse: the user's last request was
			// almost 30 minutes ago.
			if err := setup.Expire(ctx, key, 5*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
			in := newInstance(t, b.Client, prefix, time.Hour)
			// Opens the pipeliner's connection (its handshake would be
			// counted below); an unknown token writes nothing.
			if _, err := in.sessions.UserID(ctx, "warm-up"); !errors.Is(err, ports.ErrUnknownToken) {
				t.Fatalf("warm-up lookup: %v", err)
			}
			sentBefore := in.sent.all.Load()
			if u, err := in.sessions.UserID(ctx, token); err != nil || u != 7 {
				t.Fatalf("lookup: %d, %v", u, err)
			}
			// The refresh is sent without being waited for (it rides with
			// the pipeliner's next batch): the lookup costs one round trip,
			// and the expiry is pushed back by three commands in all.
			// (The hook counts a batch once its replies are read, which may be
			// after Redis applied it: wait for both.)
			testenv.Eventually(t, 2*time.Second, func() (bool, string) {
				ttl := setup.TTL(ctx, key).Val() // not through in.rdb, whose commands are counted
				n := in.sent.all.Load() - sentBefore
				return ttl >= 29*time.Minute && n >= 3, fmt.Sprintf("TTL after a request = %s (want it back to 30m), %d commands sent", ttl, n)
			})
			if n := in.sent.all.Load() - sentBefore; n != 3 {
				t.Fatalf("a missing lookup of a lapsing session sent %d commands, want 3 (HGET and PTTL together, then PEXPIRE)", n)
			}
			// The refresh is a write, reported to every cache (this one
			// too): it evicts, and the next request looks up once more,
			// without writing (the TTL is fresh), and caches.
			testenv.Eventually(t, 2*time.Second, func() (bool, string) {
				return in.sessions.Reports() >= 1, "the refresh has not been reported"
			})
			before := in.sent.all.Load()
			for i := 0; i < 100; i++ {
				if u, err := in.sessions.UserID(ctx, token); err != nil || u != 7 {
					t.Fatalf("lookup %d: %d, %v", i, u, err)
				}
			}
			if n := in.sent.all.Load() - before; n > 2 {
				t.Fatalf("100 lookups within the period sent %d commands, want at most 2 (one HGET and PTTL, no refresh)", n)
			}
		})
	}
}

// On a server without CLIENT TRACKING (the embedded miniredis) NewTracked
// says so, and the service falls back.
func TestTrackedNeedsClientTracking(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	store := redissession.New(rdb, redissession.Options{})
	_, err := redissession.NewTracked(context.Background(), rdb, store, redissession.TrackedOptions{})
	if !errors.Is(err, redissession.ErrTrackingUnsupported) {
		t.Fatalf("NewTracked on miniredis: %v, want ErrTrackingUnsupported", err)
	}
}
