package redisroom

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/test/testenv"
)

// TestLoadScriptsFillsTheScriptCache: after LoadScripts every script of the
// rooms is in the script cache of a Redis that started without them, so the
// first room operations after a start run by SHA.
func TestLoadScriptsFillsTheScriptCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
	}{
		{"miniredis", func(t *testing.T) redis.UniversalClient { _, c := testenv.MiniRedis(t); return c }},
		{"own_redis", func(t *testing.T) redis.UniversalClient { return testenv.StartRedis(t).Client() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := tc.rdb(t)
			hashes := make([]string, len(scripts))
			for i, sc := range scripts {
				hashes[i] = sc.Hash()
			}
			cached := func() []bool {
				got, err := rdb.ScriptExists(ctx, hashes...).Result()
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			for i, in := range cached() {
				if in {
					t.Fatalf("script %s is cached before LoadScripts: the test proves nothing", hashes[i])
				}
			}
			if err := LoadScripts(ctx, rdb); err != nil {
				t.Fatal(err)
			}
			for i, in := range cached() {
				if !in {
					t.Errorf("script %s is not in the script cache after LoadScripts", hashes[i])
				}
			}
		})
	}
}
