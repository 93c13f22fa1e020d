// Package redisx holds what the Redis adapters share in how they talk to
// Redis: scripts run by their SHA and the lock release (script.go), the
// claim path's batching and its replicated writes (batch.go).
package redisx

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
)

// loadTimeout bounds one shared load, which no single caller's deadline may
// cut short for the others waiting on it.
const loadTimeout = 5 * time.Second

// Set runs an adapter's Lua scripts by their SHA and keeps them loaded:
// all of them on every node at start, and all of them again,
// once, when Redis answers NOSCRIPT (a restart, a failover to a replica that
// never ran them, SCRIPT FLUSH). go-redis's Script.Run instead answers each
// NOSCRIPT with an EVAL of the whole script: a stampede that meets an empty
// script cache sends the body once per claim (1,223 times for 1,200 claims on
// a 16-bucket voucher), while one SCRIPT LOAD serves them all.
//
// Set is the scripts one adapter runs, over the client that loads them.
type Set struct {
	rdb     redis.UniversalClient
	scripts []*redis.Script
	loads   singleflight.Group
	// loaded counts the shared loads that finished: a caller whose NOSCRIPT
	// was answered before the latest of them finished needs no load of its
	// own (its scripts are there now).
	loaded atomic.Uint64
}

// NewSet: rdb loads the scripts; a cluster client sends SCRIPT LOAD to every
// node.
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

// reload is Load shared by every caller that meets NOSCRIPT while it runs,
// and skipped by a caller that saw fewer finished loads (seen) before the
// EVALSHA that met NOSCRIPT: a load finished since then. Without that, on a
// loaded machine a caller answered NOSCRIPT during one load could start
// another after it, and a stampede load the scripts three times or more.
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

// Run runs sc by its SHA on c (the loading client, or a pipeliner over it);
// on NOSCRIPT it is Retry. It is the one way the set's scripts run.
func (s *Set) Run(ctx context.Context, c redis.Scripter, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	r := sc.EvalSha(ctx, c, keys, args...)
	if IsNoScript(r.Err()) {
		return s.Retry(ctx, c, sc, keys, args...)
	}
	return r
}

// Retry answers a NOSCRIPT that sc's EVALSHA met (on its own or in a
// pipeline): sc runs by its SHA again, and only if that meets NOSCRIPT too is
// the set reloaded, once for all concurrent callers, and sc run again; not
// even once when a load finished after that second NOSCRIPT was answered
// (reload). The first try spares a reload to the callers whose NOSCRIPT was
// answered before a reload they did not wait on finished. A failed reload is
// the answer.
func (s *Set) Retry(ctx context.Context, c redis.Scripter, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	seen := s.loaded.Load()
	if r := sc.EvalSha(ctx, c, keys, args...); !IsNoScript(r.Err()) {
		return r
	}
	if err := s.reload(ctx, seen); err != nil {
		r := redis.NewCmd(ctx)
		r.SetErr(err)
		return r
	}
	return sc.EvalSha(ctx, c, keys, args...)
}

// IsNoScript tells Redis's answer to an EVALSHA of a script it does not hold.
func IsNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// releaseScript deletes a lock's key only while it still holds its holder's
// token, in one step: between a GET and a DEL the lock could expire and be
// taken by another, whose lock the DEL would then delete.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// Release frees the lock on key if token still holds it; a lock that expired
// and was taken by another is left to its new holder.
func Release(ctx context.Context, rdb redis.Scripter, key, token string) error {
	return releaseScript.Run(ctx, rdb, []string{key}, token).Err()
}
