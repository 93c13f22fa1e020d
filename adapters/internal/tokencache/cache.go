// Package tokencache is the session cache's store: token -> what it resolved
// to, bounded in size, each entry served only until its own expiry. Both the
// Redis sessions (redissession.Sessions) and the identity provider's signed
// tokens (jwtsession) keep their answers in it.
package tokencache

import (
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Cache is an LRU of at most size tokens, each of which lapses when its
// expiry passes (a life of the caller's choosing after it was added).
// The expiry is looked at when an entry is read, not kept by a timer:
// expirable.LRU's per-entry expiry buckets and cleanup goroutine cost about
// twice as much per miss and add, which every user's first claim pays. A
// lapsed entry is never returned; it stays until it is overwritten or the LRU
// pushes it out, so the memory bound is size either way. Safe for concurrent
// use.
type Cache[V any] struct {
	lru *lru.Cache[string, *Entry[V]]
	// Now is the cache's clock; by default monotonic, so a change of the
	// wall clock moves no expiry. A test, or an owner whose expiries are
	// on another clock, replaces it before first use.
	Now func() time.Duration
	// States, when set (redissession.Sessions: the slots' states), are the
	// generations entries are checked against: an entry is served only
	// while States[Slot] is still the State it was read under.
	States []atomic.Uint64
}

// Entry is one token's answer.
type Entry[V any] struct {
	Value   V
	Expires time.Duration // on Now's scale
	// Slot and State: the token's slot, and its state when the read that
	// made this entry began (see Cache.States).
	Slot  uint16
	State uint64
	// Refreshed is when (on Now's scale) its owner last sent a refresh of
	// the session's expiry, so that a burst of hits sends one.
	Refreshed atomic.Int64
}

// DefaultSize is the size both session caches default to.
const DefaultSize = 100_000

// New panics on a size below 1: callers default it (DefaultSize).
func New[V any](size int) *Cache[V] {
	c, err := lru.New[string, *Entry[V]](size)
	if err != nil {
		panic("tokencache: size must be positive")
	}
	start := time.Now() // time.Since reads the monotonic clock
	return &Cache[V]{lru: c, Now: func() time.Duration { return time.Since(start) }}
}

func (c *Cache[V]) Get(token string) (v V, ok bool) {
	if e, ok := c.Entry(token, c.Now()); ok {
		return e.Value, true
	}
	return v, false
}

// Entry returns the token's entry unless it is missing, lapsed at now, or
// stale (its slot's state moved since it was read).
func (c *Cache[V]) Entry(token string, now time.Duration) (*Entry[V], bool) {
	e, ok := c.lru.Get(token)
	if !ok || !c.live(e, now) {
		return nil, false
	}
	return e, true
}

// Holds tells whether the token would be served, without touching its place
// in the LRU.
func (c *Cache[V]) Holds(token string) bool {
	e, ok := c.lru.Peek(token)
	return ok && c.live(e, c.Now())
}

func (c *Cache[V]) live(e *Entry[V], now time.Duration) bool {
	return now < e.Expires && (c.States == nil || c.States[e.Slot].Load() == e.State)
}

// AddFor keeps the token for life, as read under its slot's state.
func (c *Cache[V]) AddFor(token string, v V, life time.Duration, slot uint16, state uint64) {
	c.lru.Add(token, &Entry[V]{Value: v, Expires: c.Now() + life, Slot: slot, State: state})
}

func (c *Cache[V]) Remove(token string) { c.lru.Remove(token) }

func (c *Cache[V]) Len() int { return c.lru.Len() }
