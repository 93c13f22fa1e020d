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

// TestSessionCache proves the cache's promise (a repeat lookup costs no Redis
// command) and its limits (misses are not cached; a revoked token stops
// working once the cache's TTL has passed), on miniredis and real Redis. The
// Sessions contract the cached store shares with the others is in
// test/contract.
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
			var cmds commandCounter
			counted.AddHook(&cmds)
			prefix := testenv.KeyPrefix(t)
			testenv.DropPrefix(t, rdb, prefix)
			store := redissession.New(counted, redissession.Options{Prefix: prefix + "login:token:"})
			const cacheTTL = 500 * time.Millisecond
			cached := redissession.NewCached(store, redissession.CacheOptions{Size: 2, TTL: cacheTTL})
			ctx := testCtx(t)

			t.Run("repeat_lookup_costs_no_redis_command", func(t *testing.T) {
				token, err := store.Mint(ctx, 7)
				if err != nil {
					t.Fatal(err)
				}
				before := cmds.n.Load()
				resolves(t, cached, token, 7)
				if got := cmds.n.Load() - before; got != 1 {
					t.Fatalf("first lookup sent %d commands, want 1", got)
				}
				for range 5 {
					resolves(t, cached, token, 7)
				}
				if got := cmds.n.Load() - before; got != 1 {
					t.Fatalf("six lookups sent %d commands, want 1", got)
				}
			})

			t.Run("misses_are_not_cached", func(t *testing.T) {
				token := redissession.NewToken()
				before := cmds.n.Load()
				unknown(t, cached, token)
				unknown(t, cached, token)
				if got := cmds.n.Load() - before; got != 2 {
					t.Fatalf("two misses sent %d commands, want 2", got)
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
				unknown(t, store, token)
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
				// Size 2: the first token was evicted and costs a command again.
				before := cmds.n.Load()
				resolves(t, cached, tokens[0], 20)
				if got := cmds.n.Load() - before; got != 1 {
					t.Fatalf("lookup of an evicted token sent %d commands, want 1", got)
				}
			})
		})
	}
}
