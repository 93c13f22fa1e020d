// Package tokencache is the session caches' store: token -> what it resolved to,
// bounded in size, each entry served only until its own expiry.
package tokencache

import (
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Cache is an LRU of at most size tokens, each lapsing at its own expiry (checked
// on read: cheaper than expirable.LRU's timers). Safe for concurrent use.
type Cache[V any] struct {
	lru *lru.Cache[string, *Entry[V]]
	Now func() time.Duration // the cache's clock (monotonic); an owner may replace it before first use
	// States, when set, are generations: an entry is served only while States[Slot] is its State.
	States []atomic.Uint64
}

// Entry is one token's answer.
type Entry[V any] struct {
	Value     V
	Expires   time.Duration // on Now's scale
	Slot      uint16
	State     uint64
	Refreshed atomic.Int64 // when its owner last sent a refresh of the session's expiry
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
