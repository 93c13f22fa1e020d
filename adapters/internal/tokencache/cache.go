// Package tokencache is the session caches' store (redissession, jwtsession):
// token -> what it resolved to, bounded in size, each entry served only until
// its own expiry.
package tokencache

import (
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Cache is an LRU of at most size tokens, each lapsing at its own expiry,
// which is checked on read rather than kept by a timer: expirable.LRU's expiry
// buckets and cleanup goroutine cost about twice as much per miss and add,
// which every user's first claim pays. A lapsed entry is never returned.
// Safe for concurrent use.
type Cache[V any] struct {
	lru *lru.Cache[string, *Entry[V]]
	// Now is the cache's clock, monotonic by default; an owner whose expiries
	// are on another clock replaces it before first use.
	Now func() time.Duration
	// States, when set (redissession: the slots' states), are the generations
	// entries are checked against: an entry is served only while
	// States[Slot] is still the State it was read under.
	States []atomic.Uint64
}

// Entry is one token's answer.
type Entry[V any] struct {
	Value   V
	Expires time.Duration // on Now's scale
	Slot    uint16
	State   uint64
	// Refreshed is when (on Now's scale) its owner last sent a refresh of the
	// session's expiry, so that a burst of hits sends one.
	Refreshed atomic.Int64
}

const DefaultSize = 100_000

// New panics on a size below 1.
func New[V any](size int) *Cache[V] {
	c, err := lru.New[string, *Entry[V]](size)
	if err != nil {
		panic("tokencache: size must be positive")
	}
	start := time.Now()
	return &Cache[V]{lru: c, Now: func() time.Duration { return time.Since(start) }}
}

func (c *Cache[V]) Get(token string) (v V, ok bool) {
	if e, ok := c.Entry(token, c.Now()); ok {
		return e.Value, true
	}
	return v, false
}

// Entry returns the token's entry unless it is missing, lapsed at now, or stale.
func (c *Cache[V]) Entry(token string, now time.Duration) (*Entry[V], bool) {
	e, ok := c.lru.Get(token)
	if !ok || !c.live(e, now) {
		return nil, false
	}
	return e, true
}

// Holds tells whether the token would be served, without touching the LRU.
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
