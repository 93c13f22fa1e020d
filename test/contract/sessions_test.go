package contract_test

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

type sessionSubject struct {
	sessions ports.Sessions
	issuer   ports.TokenIssuer
}

type sessionBackend struct {
	name string
	open func(t *testing.T) func(t *testing.T) sessionSubject
}

func sessionBackends() []sessionBackend {
	redisSubject := func(t *testing.T, rdb redis.UniversalClient, cached bool) sessionSubject {
		prefix := testenv.KeyPrefix(t)
		testenv.DropPrefix(t, rdb, prefix)
		store := redissession.New(rdb, redissession.Options{Prefix: prefix + "login:token:"})
		s := sessionSubject{sessions: store, issuer: store}
		if cached {
			s.sessions = redissession.NewCached(store, redissession.CacheOptions{})
		}
		return s
	}
	mini := func(cached bool) func(*testing.T) func(t *testing.T) sessionSubject {
		return func(*testing.T) func(t *testing.T) sessionSubject {
			return func(t *testing.T) sessionSubject {
				_, rdb := testenv.MiniRedis(t)
				return redisSubject(t, rdb, cached)
			}
		}
	}
	real := func(connect func(testing.TB) redis.UniversalClient, cached bool) func(*testing.T) func(t *testing.T) sessionSubject {
		return func(t *testing.T) func(t *testing.T) sessionSubject {
			rdb := connect(t)
			return func(t *testing.T) sessionSubject { return redisSubject(t, rdb, cached) }
		}
	}
	backends := []sessionBackend{
		{name: "memory", open: func(*testing.T) func(t *testing.T) sessionSubject {
			return func(*testing.T) sessionSubject {
				s := memory.NewSessions()
				return sessionSubject{sessions: s, issuer: s}
			}
		}},
		{name: "miniredis", open: mini(false)},
		{name: "miniredis_cached", open: mini(true)},
	}
	for _, b := range testenv.RealRedisBackends() {
		backends = append(backends,
			sessionBackend{name: b.Name, open: real(b.Client, false)},
			sessionBackend{name: b.Name + "_cached", open: real(b.Client, true)})
	}
	return backends
}

func sessionCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func sessionMint(t *testing.T, s sessionSubject, user domain.UserID) string {
	t.Helper()
	token, err := s.issuer.Mint(sessionCtx(t), user)
	if err != nil {
		t.Fatalf("mint for user %d: %v", user, err)
	}
	return token
}

func sessionResolves(t *testing.T, s ports.Sessions, token string, want domain.UserID) {
	t.Helper()
	got, err := s.UserID(sessionCtx(t), token)
	if err != nil || got != want {
		t.Fatalf("token %q: got user %d, err %v; want user %d", token, got, err, want)
	}
}

func sessionUnknown(t *testing.T, s ports.Sessions, token string) {
	t.Helper()
	got, err := s.UserID(sessionCtx(t), token)
	if !errors.Is(err, ports.ErrUnknownToken) {
		t.Fatalf("token %q: got user %d, err %v; want ErrUnknownToken", token, got, err)
	}
}

var sessionTokenShape = regexp.MustCompile(`^[0-9a-f]{32}$`)

var sessionCases = []struct {
	name string
	run  func(t *testing.T, s sessionSubject)
}{
	{"unknown_token", func(t *testing.T, s sessionSubject) {
		sessionUnknown(t, s.sessions, "0123456789abcdef0123456789abcdef")
	}},
	{"empty_token", func(t *testing.T, s sessionSubject) {
		sessionUnknown(t, s.sessions, "")
	}},
	{"minted_token_resolves", func(t *testing.T, s sessionSubject) {
		token := sessionMint(t, s, 42)
		if !sessionTokenShape.MatchString(token) {
			t.Fatalf("token %q is not 32 lowercase hex characters", token)
		}
		sessionResolves(t, s.sessions, token, 42)
		sessionResolves(t, s.sessions, token, 42)
	}},
	{"tokens_are_distinct_per_mint", func(t *testing.T, s sessionSubject) {
		a, b, c := sessionMint(t, s, 42), sessionMint(t, s, 42), sessionMint(t, s, 43)
		if a == b {
			t.Fatalf("two mints gave the same token %q", a)
		}
		sessionResolves(t, s.sessions, a, 42)
		sessionResolves(t, s.sessions, b, 42)
		sessionResolves(t, s.sessions, c, 43)
	}},
	{"mint_refuses_invalid_user", func(t *testing.T, s sessionSubject) {
		if token, err := s.issuer.Mint(sessionCtx(t), 0); err == nil {
			t.Fatalf("minted %q for user 0", token)
		}
	}},
	{"concurrent_mint_and_lookup", func(t *testing.T, s sessionSubject) {
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for u := 1; u <= 200; u++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				token, err := s.issuer.Mint(ctx, domain.UserID(u))
				if err != nil {
					errs <- err
					return
				}
				for range 3 {
					if got, err := s.sessions.UserID(ctx, token); err != nil || got != domain.UserID(u) {
						errs <- errors.Join(err, errors.New("resolved to the wrong user"))
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}},
}

func TestSessionsContract(t *testing.T) {
	for _, b := range sessionBackends() {
		t.Run(b.name, func(t *testing.T) {
			newSubject := b.open(t)
			for _, tc := range sessionCases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, newSubject(t)) })
			}
		})
	}
}

// sessionCounter counts the commands a client sends, pipelines included,
// except the handshake go-redis runs on each new connection (HELLO, CLIENT
// SETINFO...), whose timing depends on the pool, not on the code under test.
type sessionCounter struct{ n atomic.Int64 }

func (c *sessionCounter) count(cmd redis.Cmder) {
	switch cmd.Name() {
	case "hello", "client", "auth", "select":
	default:
		c.n.Add(1)
	}
}

func (c *sessionCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *sessionCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *sessionCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*sessionCounter)(nil)

// TestSessionCache proves the cache's promise (a repeat lookup costs no Redis
// command) and its limits (misses are not cached; a revoked token stops
// working once the cache's TTL has passed), on miniredis and real Redis.
func TestSessionCache(t *testing.T) {
	backends := []struct {
		name string
		rdb  func(t *testing.T) *redis.Client
	}{
		{"miniredis", func(t *testing.T) *redis.Client { _, rdb := testenv.MiniRedis(t); return rdb }},
		{"redis", func(t *testing.T) *redis.Client { return testenv.RealRedis(t) }},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			rdb := b.rdb(t)
			// A client of its own, so the hook counts only this test's commands.
			o := rdb.Options()
			counted := redis.NewClient(&redis.Options{Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB})
			t.Cleanup(func() { _ = counted.Close() })
			var cmds sessionCounter
			counted.AddHook(&cmds)
			prefix := testenv.KeyPrefix(t)
			testenv.DropPrefix(t, rdb, prefix)
			store := redissession.New(counted, redissession.Options{Prefix: prefix + "login:token:"})
			const cacheTTL = 500 * time.Millisecond
			cached := redissession.NewCached(store, redissession.CacheOptions{Size: 2, TTL: cacheTTL})
			ctx := sessionCtx(t)

			t.Run("repeat_lookup_costs_no_redis_command", func(t *testing.T) {
				token, err := store.Mint(ctx, 7)
				if err != nil {
					t.Fatal(err)
				}
				before := cmds.n.Load()
				sessionResolves(t, cached, token, 7)
				if got := cmds.n.Load() - before; got != 1 {
					t.Fatalf("first lookup sent %d commands, want 1", got)
				}
				for range 5 {
					sessionResolves(t, cached, token, 7)
				}
				if got := cmds.n.Load() - before; got != 1 {
					t.Fatalf("six lookups sent %d commands, want 1", got)
				}
			})

			t.Run("misses_are_not_cached", func(t *testing.T) {
				token := redissession.NewToken()
				before := cmds.n.Load()
				sessionUnknown(t, cached, token)
				sessionUnknown(t, cached, token)
				if got := cmds.n.Load() - before; got != 2 {
					t.Fatalf("two misses sent %d commands, want 2", got)
				}
				// The token appears (a login elsewhere): the next lookup sees it.
				if err := rdb.HSet(ctx, prefix+"login:token:"+token, "id", 8).Err(); err != nil {
					t.Fatal(err)
				}
				sessionResolves(t, cached, token, 8)
			})

			t.Run("revoked_token_works_until_the_cache_ttl", func(t *testing.T) {
				token, err := store.Mint(ctx, 9)
				if err != nil {
					t.Fatal(err)
				}
				sessionResolves(t, cached, token, 9)
				if err := rdb.Del(ctx, prefix+"login:token:"+token).Err(); err != nil {
					t.Fatal(err)
				}
				sessionUnknown(t, store, token)
				revoked := time.Now()
				// Within the bound the cached answer stands. The assertion is
				// skipped if the machine stalled past the TTL meanwhile.
				if _, err := cached.UserID(ctx, token); err != nil && time.Since(revoked) < cacheTTL/2 {
					t.Fatalf("cached token failed right after revocation: %v", err)
				}
				// ...and after it the token is unknown.
				deadline := time.Now().Add(10 * cacheTTL)
				for {
					_, err := cached.UserID(ctx, token)
					if errors.Is(err, ports.ErrUnknownToken) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("revoked token still resolves %s after revocation (cache TTL %s): %v", time.Since(revoked), cacheTTL, err)
					}
					time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
				}
			})

			t.Run("size_is_bounded", func(t *testing.T) {
				tokens := make([]string, 3)
				for i := range tokens {
					tok, err := store.Mint(ctx, domain.UserID(20+i))
					if err != nil {
						t.Fatal(err)
					}
					tokens[i] = tok
					sessionResolves(t, cached, tok, domain.UserID(20+i))
				}
				// Size 2: the first token was evicted and costs a command again.
				before := cmds.n.Load()
				sessionResolves(t, cached, tokens[0], 20)
				if got := cmds.n.Load() - before; got != 1 {
					t.Fatalf("lookup of an evicted token sent %d commands, want 1", got)
				}
			})
		})
	}
}
