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
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func resolves(t *testing.T, s ports.Sessions, token string, want domain.UserID) {
	t.Helper()
	got, err := s.UserID(testCtx(t), token)
	if err != nil || got != want {
		t.Fatalf("token %q: got user %d, err %v; want user %d", token, got, err, want)
	}
}

func unknown(t *testing.T, s ports.Sessions, token string) {
	t.Helper()
	got, err := s.UserID(testCtx(t), token)
	if !errors.Is(err, ports.ErrUnknownToken) {
		t.Fatalf("token %q: got user %d, err %v; want ErrUnknownToken", token, got, err)
	}
}

// commandCounter counts the commands a client sends, pipelines included,
// except the handshake go-redis runs on each new connection (HELLO, CLIENT
// SETINFO...), whose timing depends on the pool, not on the code under test.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) count(cmd redis.Cmder) {
	switch cmd.Name() {
	case "hello", "client", "auth", "select":
	default:
		c.n.Add(1)
	}
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*commandCounter)(nil)

// TestSessionCache proves the cache's promise on a server that cannot track
// (the embedded miniredis): a repeat lookup costs no Redis command; misses
// are not cached; a revoked token stops working once UntrackedTTL has
// passed. The Sessions contract it shares with the others is in
// test/contract; what tracking adds, in sessions_test.go.
func TestSessionCache(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	// A client of its own, so the hook counts only this test's commands.
	o := rdb.Options()
	counted := redis.NewClient(&redis.Options{Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB})
	t.Cleanup(func() { _ = counted.Close() })
	var cmds commandCounter
	counted.AddHook(&cmds)
	prefix := testenv.KeyPrefix(t)
	store := redissession.New(counted, redissession.Options{Prefix: prefix + "login:token:"})
	const cacheTTL = 500 * time.Millisecond
	ctx := testCtx(t)
	cached, err := redissession.NewSessions(ctx, counted, store, redissession.CacheOptions{Size: 2, UntrackedTTL: cacheTTL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cached.Close() })
	if cached.Tracking() {
		t.Fatal("the cache says it tracks on miniredis, which cannot")
	}
	// A lookup is HGET and PTTL.
	const lookup = 2

	t.Run("repeat_lookup_costs_no_redis_command", func(t *testing.T) {
		token, err := store.Mint(ctx, 7)
		if err != nil {
			t.Fatal(err)
		}
		before := cmds.n.Load()
		resolves(t, cached, token, 7)
		if got := cmds.n.Load() - before; got != lookup {
			t.Fatalf("first lookup sent %d commands, want %d", got, lookup)
		}
		for range 5 {
			resolves(t, cached, token, 7)
		}
		if got := cmds.n.Load() - before; got != lookup {
			t.Fatalf("six lookups sent %d commands, want %d", got, lookup)
		}
	})

	t.Run("misses_are_not_cached", func(t *testing.T) {
		token := redissession.NewToken()
		before := cmds.n.Load()
		unknown(t, cached, token)
		unknown(t, cached, token)
		if got := cmds.n.Load() - before; got != 2*lookup {
			t.Fatalf("two misses sent %d commands, want %d", got, 2*lookup)
		}
		// The token appears (a login elsewhere): the next lookup sees it.
		if err := rdb.HSet(ctx, prefix+"login:token:"+token, "id", 8).Err(); err != nil {
			t.Fatal(err)
		}
		resolves(t, cached, token, 8)
	})

	t.Run("revoked_token_works_until_the_cache_ttl", func(t *testing.T) {
		token, err := store.Mint(ctx, 9)
		if err != nil {
			t.Fatal(err)
		}
		resolves(t, cached, token, 9)
		if err := rdb.Del(ctx, prefix+"login:token:"+token).Err(); err != nil {
			t.Fatal(err)
		}
		revoked := time.Now()
		// Within the bound the cached answer stands. The assertion is
		// skipped if the machine stalled past the TTL meanwhile.
		if _, err := cached.UserID(ctx, token); err != nil && time.Since(revoked) < cacheTTL/2 {
			t.Fatalf("cached token failed right after revocation: %v", err)
		}
		// ...and after it the token is unknown.
		testenv.Eventually(t, 10*cacheTTL, func() (bool, string) {
			_, err := cached.UserID(ctx, token)
			return errors.Is(err, ports.ErrUnknownToken),
				fmt.Sprintf("revoked token still resolves %s after revocation (cache TTL %s): %v", time.Since(revoked), cacheTTL, err)
		})
	})

	t.Run("size_is_bounded", func(t *testing.T) {
		tokens := make([]string, 3)
		for i := range tokens {
			tok, err := store.Mint(ctx, domain.UserID(20+i))
			if err != nil {
				t.Fatal(err)
			}
			tokens[i] = tok
			resolves(t, cached, tok, domain.UserID(20+i))
		}
		// Size 2: the first token was evicted and costs a lookup again.
		before := cmds.n.Load()
		resolves(t, cached, tokens[0], 20)
		if got := cmds.n.Load() - before; got != lookup {
			t.Fatalf("lookup of an evicted token sent %d commands, want %d", got, lookup)
		}
	})
}
