// Package redisx holds how the Redis adapters talk to Redis: scripts run by
// their SHA, the lock release, the claim path's batching and replicated writes.
package redisx

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
)

// loadTimeout bounds one shared load, which no single caller's deadline may cut short.
const loadTimeout = 5 * time.Second

// Set is the Lua scripts one adapter runs by their SHA: loaded on every node at
// start, and all again, once, when Redis answers NOSCRIPT (where go-redis's
// Script.Run would EVAL the whole body once per claim of a stampede).
type Set struct {
	rdb     redis.UniversalClient
	scripts []*redis.Script
	loads   singleflight.Group
	loaded  atomic.Uint64 // shared loads finished
}

// NewSet: rdb loads the scripts (a cluster client on every node).
func NewSet(rdb redis.UniversalClient, scripts ...*redis.Script) *Set {
	return &Set{rdb: rdb, scripts: scripts}
}

// Load loads every script of the set on every node.
func (s *Set) Load(ctx context.Context) error {
	for _, sc := range s.scripts {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("load script %s: %w", sc.Hash(), err)
		}
	}
	return nil
}

// reload is Load shared by every caller that meets NOSCRIPT while it runs, and
// skipped when a load finished since the caller's EVALSHA (seen).
func (s *Set) reload(ctx context.Context, seen uint64) error {
	if s.loaded.Load() != seen {
		return nil
	}
	_, err, _ := s.loads.Do("", func() (any, error) {
		if s.loaded.Load() != seen {
			return nil, nil // finished between the check and this flight
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		defer cancel()
		if err := s.Load(lctx); err != nil {
			return nil, err
		}
		s.loaded.Add(1)
		return nil, nil
	})
	return err
}

// Run runs sc by its SHA on c (the loading client, or a pipeliner over it); on NOSCRIPT it is Retry.
func (s *Set) Run(ctx context.Context, c redis.UniversalClient, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	r := sc.EvalSha(ctx, c, keys, args...)
	if IsNoScript(r.Err()) {
		return s.Retry(ctx, c, sc, r)
	}
	return r
}

// Retry answers a NOSCRIPT that failed, an EVALSHA of sc, met: sc runs again with its keys and
// arguments, and only if that meets NOSCRIPT too is the set reloaded and sc run again. A failed
// reload is the answer.
func (s *Set) Retry(ctx context.Context, c redis.UniversalClient, sc *redis.Script, failed *redis.Cmd) *redis.Cmd {
	again := func() *redis.Cmd {
		args := slices.Clone(failed.Args())
		args[1] = sc.Hash()
		r := redis.NewCmd(ctx, args...)
		_ = c.Process(ctx, r)
		return r
	}
	seen := s.loaded.Load()
	if r := again(); !IsNoScript(r.Err()) {
		return r
	}
	if err := s.reload(ctx, seen); err != nil {
		r := redis.NewCmd(ctx)
		r.SetErr(err)
		return r
	}
	return again()
}

// IsNoScript tells Redis's answer to an EVALSHA of a script it does not hold.
func IsNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// releaseScript deletes a lock's key only while it holds its holder's token, in one step.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// Release frees the lock on key if token still holds it.
func Release(ctx context.Context, rdb redis.Scripter, key, token string) error {
	return releaseScript.Run(ctx, rdb, []string{key}, token).Err()
}
