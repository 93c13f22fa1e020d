package contract_test

import (
	"context"
	"errors"
	"regexp"
	"sync"
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
		// Cached: the one session cache as the service runs it (tracked
		// on a real Redis, bounded in time on miniredis); otherwise every
		// lookup asks Redis (Tuning.TokenCacheTTL=0).
		sessions, err := redissession.NewSessions(context.Background(), rdb, store, redissession.CacheOptions{NoCache: !cached})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sessions.Close() })
		return sessionSubject{sessions: sessions, issuer: store}
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
