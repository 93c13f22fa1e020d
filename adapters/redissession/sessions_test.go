package redissession_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// commands counts what one instance sends to Redis, but a new connection's
// handshake (the pipeliner opens one per node on first use).
type commands struct {
	all, pexpire atomic.Int64
	mu           sync.Mutex
	names        []string // the last commands counted, to say what they were
}

func (c *commands) add(cmd redis.Cmder) {
	switch cmd.Name() {
	case "hello", "client", "auth", "select", "ping", "readonly", "cluster":
		return
	case "pexpire":
		c.pexpire.Add(1)
	}
	c.record(cmd)
	c.all.Add(1)
}
func (c *commands) record(cmd redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = append(c.names, fmt.Sprint(cmd.Args()...))
	if len(c.names) > 16 {
		c.names = c.names[len(c.names)-16:]
	}
}

// last returns the last n commands sent.
func (c *commands) last(n int64) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.names[max(0, len(c.names)-int(n)):]...)
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
// its own automatic pipeliner, as in the service) and its own Sessions cache.
type instance struct {
	rdb      redis.UniversalClient
	sessions *redissession.Sessions
	store    *redissession.Store
	sent     *commands
}

func newInstance(t *testing.T, connect func(testing.TB) redis.UniversalClient, prefix string, opts redissession.CacheOptions) instance {
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
	tr, err := redissession.NewSessions(context.Background(), rdb, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return instance{rdb: rdb, sessions: tr, store: store, sent: sent}
}

// requireFreeLookups makes 100 lookups of token on in, each of which must
// resolve to want without sending Redis anything.
func requireFreeLookups(t *testing.T, in instance, token string, want domain.UserID, what string) {
	t.Helper()
	before := in.sent.all.Load()
	reports, readBack, pexpires := in.sessions.Reports(), in.sessions.Prefetched(), in.sent.pexpire.Load()
	for i := 0; i < 100; i++ {
		if u, err := in.sessions.UserID(context.Background(), token); err != nil || u != want {
			t.Fatalf("lookup %d of %s: %d, %v; want %d", i, what, u, err, want)
		}
	}
	if n := in.sent.all.Load() - before; n != 0 {
		// What else happened meanwhile says where the commands came from.
		t.Fatalf("100 lookups of %s sent %d commands %q, want 0 (meanwhile %d reports heard, %d sessions read back, %d PEXPIRE sent)",
			what, n, in.sent.last(n), in.sessions.Reports()-reports, in.sessions.Prefetched()-readBack, in.sent.pexpire.Load()-pexpires)
	}
}

// mintLapsing logs user in through a client of its own (not an instance's,
// whose commands are counted) before any instance listens, and leaves the
// session 5 s to live, so that its next lookup sends a refresh. It returns
// that client and the token.
func mintLapsing(t *testing.T, b testenv.RedisBackend, prefix string, user domain.UserID) (redis.UniversalClient, string) {
	t.Helper()
	ctx := context.Background()
	setup := b.Client(t)
	token, err := redissession.New(setup, redissession.Options{Prefix: prefix}).Mint(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if err := setup.Expire(ctx, prefix+token, 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	return setup, token
}

// TestSessionsRevokesOnEveryInstance: a token both instances have cached
// (the second lookup on each costs no Redis) stops resolving on the other
// instance as soon as Redis reports the DEL; no cache TTL is waited out (the
// period here is an hour).
func TestSessionsRevokesOnEveryInstance(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			prefix := testenv.TokenPrefix(t)
			ctx := context.Background()
			// Logged in before the instances listen: the login's own
			// report would otherwise race the first lookups (and, safely,
			// keep them from caching).
			token, err := redissession.New(b.Client(t), redissession.Options{Prefix: prefix}).Mint(ctx, 42)
			if err != nil {
				t.Fatal(err)
			}
			a := newInstance(t, b.Client, prefix, redissession.CacheOptions{})
			other := newInstance(t, b.Client, prefix, redissession.CacheOptions{})
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
			// The deleting instance hears the same report on its own
			// subscriber, which may come a moment later than the other's.
			testenv.Eventually(t, 2*time.Second, func() (bool, string) {
				_, err := a.sessions.UserID(ctx, token)
				return errors.Is(err, ports.ErrUnknownToken), fmt.Sprintf("revoked token on the deleting instance: %v", err)
			})
		})
	}
}

// TestSessionsSlidesExpiryOnAMiss: a lookup that misses pushes a lapsing
// session's expiry back to its TTL in the same round trip (as hmdp's
// RefreshTokenInterceptor does per request); that write's report makes the
// instance read the session back (two commands, no write: the TTL is
// fresh), and the requests that follow cost nothing at all.
func TestSessionsSlidesExpiryOnAMiss(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			prefix := testenv.TokenPrefix(t)
			ctx := context.Background()
			// The session is written before the instance starts listening,
			// so the only report it hears is its own EXPIRE's. It is about
			// to lapse: the user's last request was almost 30 minutes ago.
			setup, token := mintLapsing(t, b, prefix, 7)
			key := prefix + token
			in := newInstance(t, b.Client, prefix, redissession.CacheOptions{})
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
			// the pipeliner's next batch). Its report evicts the token and
			// the instance reads it back: HGET and PTTL, then PEXPIRE, then
			// HGET and PTTL again. (The hook counts a batch once its replies
			// are read: wait for all of it.)
			testenv.Eventually(t, 2*time.Second, func() (bool, string) {
				ttl := setup.TTL(ctx, key).Val() // not through in.rdb, whose commands are counted
				return ttl >= 29*time.Minute && in.sessions.Prefetched() >= 1,
					fmt.Sprintf("TTL after a request = %s (want it back to 30m), %d sessions read back", ttl, in.sessions.Prefetched())
			})
			testenv.Eventually(t, 2*time.Second, func() (bool, string) {
				n := in.sent.all.Load() - sentBefore
				return n >= 5, fmt.Sprintf("%d commands counted", n)
			})
			if n, p := in.sent.all.Load()-sentBefore, in.sent.pexpire.Load(); n != 5 || p != 1 {
				t.Fatalf("a missing lookup of a lapsing session and its read-back sent %d commands (%d PEXPIRE), want 5 (1)", n, p)
			}
			requireFreeLookups(t, in, token, 7, "a freshly refreshed session")
		})
	}
}

// TestSessionsMissKeepsAReadBackThatOvertookIt: a request's miss that sent
// the refresh can be overtaken, between its read and its caching, by the
// refresh's report and the read-back that report queues (the request's
// goroutine waiting for a CPU meanwhile). The read-back is the later read.
// Whether it caches before the request's caching step (which then refuses,
// leaving the read-back's entry) or after it (replacing the request's
// entry, or finding it evicted by the report), the token stays cached and
// the next lookups cost nothing.
func TestSessionsMissKeepsAReadBackThatOvertookIt(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		for _, stage := range []string{"read", "add"} {
			t.Run(b.Name+"/overtaken_after_"+stage, func(t *testing.T) {
				prefix := testenv.TokenPrefix(t)
				ctx := context.Background()
				// Lapsing, so the miss sends a refresh, whose report
				// queues the token to be read back.
				_, token := mintLapsing(t, b, prefix, 7)
				var in instance
				var armed atomic.Bool
				// The read-back caches once the miss is past stage: after
				// the read, it may well do so by itself; after the caching
				// step ("add"), it is held until the miss is past it.
				passed := make(chan struct{})
				opts := redissession.WithAfterLookup(redissession.CacheOptions{}, func(s string) {
					if s != stage || !armed.CompareAndSwap(true, false) {
						return
					}
					close(passed)
					testenv.Eventually(t, 2*time.Second, func() (bool, string) {
						return in.sessions.Prefetched() >= 1, "the refresh's report was not read back"
					})
				})
				if stage == "add" {
					opts = redissession.WithAfterRead(opts, func() {
						select {
						case <-passed:
						case <-time.After(5 * time.Second): // failed below: never reached
						}
					})
				}
				in = newInstance(t, b.Client, prefix, opts)
				armed.Store(true)
				sentBefore := in.sent.all.Load()
				if u, err := in.sessions.UserID(ctx, token); err != nil || u != 7 {
					t.Fatalf("lookup: %d, %v", u, err)
				}
				if armed.Load() {
					t.Fatalf("the lookup never reached stage %q", stage)
				}
				if !in.sessions.Holds(token) {
					t.Fatalf("a read-back that overtook the request's miss (after its %s) is not cached", stage)
				}
				// The hook counts a batch once its replies are read, which
				// may be after the read-back: wait for the lookup's HGET,
				// PTTL and PEXPIRE and the read-back's HGET and PTTL.
				testenv.Eventually(t, 2*time.Second, func() (bool, string) {
					n := in.sent.all.Load() - sentBefore
					return n >= 5, fmt.Sprintf("%d commands counted", n)
				})
				requireFreeLookups(t, in, token, 7, "a session read back while its miss was being cached")
			})
		}
	}
}

// TestSessionsMissDropsWhatARevocationOvertook: a logout (the token's DEL)
// reported between a request's read and its caching keeps the request's
// answer out of the cache: the next request finds the token gone.
func TestSessionsMissDropsWhatARevocationOvertook(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			prefix := testenv.TokenPrefix(t)
			ctx := context.Background()
			setup := b.Client(t)
			token, err := redissession.New(setup, redissession.Options{Prefix: prefix}).Mint(ctx, 7)
			if err != nil {
				t.Fatal(err)
			}
			var in instance
			var armed atomic.Bool
			opts := redissession.WithAfterLookup(redissession.CacheOptions{NoPrefetch: true}, func(s string) {
				if s != "read" || !armed.CompareAndSwap(true, false) {
					return
				}
				reports := in.sessions.Reports()
				if err := setup.Del(ctx, prefix+token).Err(); err != nil {
					t.Error(err)
					return
				}
				testenv.Eventually(t, 2*time.Second, func() (bool, string) {
					return in.sessions.Reports() > reports, "the DEL was not reported"
				})
			})
			in = newInstance(t, b.Client, prefix, opts)
			armed.Store(true)
			// Answered from what it read: the logout came after.
			if u, err := in.sessions.UserID(ctx, token); err != nil || u != 7 {
				t.Fatalf("lookup: %d, %v", u, err)
			}
			if armed.Load() {
				t.Fatal("the lookup never reached its read")
			}
			if in.sessions.Holds(token) {
				t.Fatal("a token deleted before its lookup was cached is held")
			}
			if u, err := in.sessions.UserID(ctx, token); !errors.Is(err, ports.ErrUnknownToken) {
				t.Fatalf("lookup after the logout: %d, %v; want ErrUnknownToken", u, err)
			}
		})
	}
}

// TestSessionsReadCachesThroughAnotherLogin: a login of another token that
// shares the read's word of the guard, written as the original writes it
// (HSET, then EXPIRE: two reports of one key) and reported while a
// request's miss or the warm-up reads a session, does not keep that read
// from caching: the session is then served without Redis. A guard that
// refused a read for any report of its word would leave it out.
func TestSessionsReadCachesThroughAnotherLogin(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		for _, reader := range []string{"miss", "warm-up"} {
			t.Run(b.Name+"/"+reader, func(t *testing.T) {
				prefix := testenv.TokenPrefix(t)
				ctx := context.Background()
				setup, tokens := mintUsers(t, b, prefix, 1)
				token, other := tokens[0], ""
				for i := 0; other == "" || !redissession.SharesGuardWord(prefix+token, prefix+other); i++ {
					other = fmt.Sprintf("%s%08x", token[:24], i)
				}
				var in instance
				var armed atomic.Bool
				during := make(chan error, 1)
				// login runs in the reader's goroutine, between its read and
				// its caching: it logs other in and waits for both reports.
				login := func() {
					if !armed.CompareAndSwap(true, false) {
						return
					}
					during <- func() error {
						reports := in.sessions.Reports()
						if err := setup.HSet(ctx, prefix+other, "id", 8).Err(); err != nil {
							return err
						}
						if err := setup.Expire(ctx, prefix+other, time.Minute).Err(); err != nil {
							return err
						}
						for deadline := time.Now().Add(5 * time.Second); in.sessions.Reports() < reports+2; {
							if time.Now().After(deadline) {
								return fmt.Errorf("%d of the login's 2 writes reported", in.sessions.Reports()-reports)
							}
							runtime.Gosched()
						}
						return nil
					}()
				}
				opts := redissession.CacheOptions{NoPrefetch: true}
				if reader == "miss" {
					opts = redissession.WithAfterLookup(opts, func(s string) {
						if s == "read" {
							login()
						}
					})
				} else {
					opts = redissession.WithAfterRead(opts, login)
				}
				in = newInstance(t, b.Client, prefix, opts)
				armed.Store(true)
				if reader == "miss" {
					if u, err := in.sessions.UserID(ctx, token); err != nil || u != 1 {
						t.Fatalf("lookup: %d, %v", u, err)
					}
				} else {
					in.sessions.Warm()
					waitWarm(t, in.sessions)
				}
				select {
				case err := <-during:
					if err != nil {
						t.Fatal(err)
					}
				default:
					t.Fatalf("no %s read the session", reader)
				}
				requireFreeLookups(t, in, token, 1, "a session read while another login was reported")
			})
		}
	}
}

// TestSessionsSlidesExpiryOnAHit: a session read from memory whose expiry is
// more than the slack behind TTL gets one PEXPIRE for a burst of requests,
// without a round trip of theirs; the instance then reads the session back
// with its new expiry and sends nothing more.
func TestSessionsSlidesExpiryOnAHit(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			prefix := testenv.TokenPrefix(t)
			ctx := context.Background()
			in := newInstance(t, b.Client, prefix, redissession.CacheOptions{})
			// A session with 20 s left, written while the instance listens:
			// it is read back and cached with that expiry.
			setup := b.Client(t)
			token := redissession.NewToken()
			key := prefix + token
			if _, err := setup.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.HSet(ctx, key, "id", 8)
				p.PExpire(ctx, key, 20*time.Second)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 2*time.Second, func() (bool, string) {
				return in.sessions.Prefetched() >= 1, "the login was not read back"
			})
			before := in.sent.all.Load()
			for i := 0; i < 100; i++ {
				if u, err := in.sessions.UserID(ctx, token); err != nil || u != 8 {
					t.Fatalf("lookup %d: %d, %v", i, u, err)
				}
			}
			testenv.Eventually(t, 2*time.Second, func() (bool, string) {
				ttl := setup.TTL(ctx, key).Val()
				return ttl >= 29*time.Minute && in.sessions.Prefetched() >= 2,
					fmt.Sprintf("TTL after 100 requests = %s (want it back to 30m), %d sessions read back", ttl, in.sessions.Prefetched())
			})
			if p := in.sent.pexpire.Load(); p != 1 {
				t.Fatalf("100 requests of a lapsing session sent %d PEXPIRE, want 1", p)
			}
			// Commands are counted as they are sent, so once the read-back
			// is cached every command of the burst has been counted: the
			// PEXPIRE, the read-back's HGET and PTTL, and the same two for
			// each request that fell between the refresh's report and the
			// read-back (it looked the session up, without writing).
			t.Logf("100 requests of a lapsing session and the read-back sent %d commands", in.sent.all.Load()-before)
			requireFreeLookups(t, in, token, 8, "a session refreshed from a hit")
		})
	}
}

// TestSessionsPrefetchesALoginOnEveryInstance: a login written while the
// instances listen is read back by each, so the user's first request costs
// no Redis anywhere; revoking it still works at once.
func TestSessionsPrefetchesALoginOnEveryInstance(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			prefix := testenv.TokenPrefix(t)
			ctx := context.Background()
			a := newInstance(t, b.Client, prefix, redissession.CacheOptions{})
			other := newInstance(t, b.Client, prefix, redissession.CacheOptions{})
			setup := b.Client(t)
			const users = 300 // more than one prefetch batch
			tokens := make([]string, users)
			for i := range tokens {
				tok, err := redissession.New(setup, redissession.Options{Prefix: prefix}).Mint(ctx, domain.UserID(i+1))
				if err != nil {
					t.Fatal(err)
				}
				tokens[i] = tok
			}
			for _, in := range []instance{a, other} {
				testenv.Eventually(t, 5*time.Second, func() (bool, string) {
					return in.sessions.Prefetched() >= users, fmt.Sprintf("%d of %d logins read back", in.sessions.Prefetched(), users)
				})
				before := in.sent.all.Load()
				for i, tok := range tokens {
					if u, err := in.sessions.UserID(ctx, tok); err != nil || u != domain.UserID(i+1) {
						t.Fatalf("first request of user %d: %d, %v", i+1, u, err)
					}
				}
				if n := in.sent.all.Load() - before; n != 0 {
					t.Fatalf("%d users' first requests sent %d commands, want 0", users, n)
				}
			}
			if err := setup.Del(ctx, prefix+tokens[0]).Err(); err != nil {
				t.Fatal(err)
			}
			for _, in := range []instance{a, other} {
				testenv.Eventually(t, 2*time.Second, func() (bool, string) {
					_, err := in.sessions.UserID(ctx, tokens[0])
					return errors.Is(err, ports.ErrUnknownToken), fmt.Sprintf("revoked token still resolves (%v)", err)
				})
			}
		})
	}
}

// TestSessionsPrefetchRacingARevocationCachesNothing: a token deleted after
// a prefetch read it, and reported before the prefetch caches it, must not
// be cached (it would resolve until the session's expiry).
func TestSessionsPrefetchRacingARevocationCachesNothing(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			prefix := testenv.TokenPrefix(t)
			ctx := context.Background()
			setup := b.Client(t)
			var (
				token   string
				reads   atomic.Int64
				tr      *redissession.Sessions
				during  = make(chan error, 1)
				checked = make(chan struct{})
			)
			opts := redissession.WithAfterRead(redissession.CacheOptions{}, func() {
				switch reads.Add(1) {
				case 1: // the login, read back: revoke it, and wait for the report
					reported := tr.Reports()
					if err := setup.Del(ctx, prefix+token).Err(); err != nil {
						during <- err
						return
					}
					for deadline := time.Now().Add(5 * time.Second); tr.Reports() == reported && time.Now().Before(deadline); {
						runtime.Gosched()
					}
				case 2: // the revocation's read-back: the first prefetch is done
					_, err := tr.UserID(ctx, token)
					during <- err
					close(checked)
				}
			})
			in := newInstance(t, b.Client, prefix, opts)
			tr = in.sessions
			token = redissession.NewToken()
			if _, err := setup.HSet(ctx, prefix+token, "id", 9).Result(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-during:
				if !errors.Is(err, ports.ErrUnknownToken) {
					t.Fatalf("a token revoked while its prefetch was in flight: %v, want ErrUnknownToken", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the prefetches did not run")
			}
			<-checked
		})
	}
}
