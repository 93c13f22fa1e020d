// Package redisx holds what the Redis adapters share in how they talk to
// Redis: scripts run by their SHA (script.go), the claim path's batching
// (batch.go) and its replicated writes (replicated.go).
package redisx

import (
	"context"
	"fmt"
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

// Reload is Load shared by every caller that meets NOSCRIPT while it runs.
func (s *Set) Reload(ctx context.Context) error {
	_, err, _ := s.loads.Do("", func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		defer cancel()
		return nil, s.Load(lctx)
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
// the set reloaded, once for all concurrent callers, and sc run again. The
// first try spares a reload to the callers whose NOSCRIPT was answered
// before a reload they did not wait on finished. A failed reload is the
// answer.
func (s *Set) Retry(ctx context.Context, c redis.Scripter, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	if r := sc.EvalSha(ctx, c, keys, args...); !IsNoScript(r.Err()) {
		return r
	}
	if err := s.Reload(ctx); err != nil {
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
