package redissession

import (
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/hmdp-go/seckill/domain"
)

// ttlCache is the token cache of Cached and Tracked: an LRU of at most size
// tokens, each of which lapses when its expiry passes (ttl after it was
// added, or a life of the caller's choosing). The expiry is looked at when
// an entry is read, not kept by a timer: expirable.LRU's per-entry expiry
// buckets and cleanup goroutine cost about twice as much per miss and add,
// which every user's first claim pays. A lapsed entry is never returned; it
// stays until it is overwritten or the LRU pushes it out, so the memory
// bound is size either way. Safe for concurrent use.
type ttlCache struct {
	lru *lru.Cache[string, *ttlEntry]
	ttl time.Duration
	now func() time.Duration // monotonic; a test moves it by hand
	// states, when set (Tracked), are the slots' states: an entry is
	// served only while its slot is in the state it was read under.
	states *slotStates
}

type ttlEntry struct {
	id      domain.UserID
	expires time.Duration // on now's scale
	// slot and state: the token's slot, and its state when the read that
	// made this entry began (Tracked only).
	slot  uint16
	state uint64
	// refreshed is when (on now's scale) a refresh of the session's expiry
	// was last sent for this entry, so that a burst of hits sends one.
	refreshed atomic.Int64
}

// monotonicStart anchors ttlCache's clock: time.Since reads the monotonic
// clock, so a change of the wall clock moves no expiry.
var monotonicStart = time.Now()

func sinceStart() time.Duration { return time.Since(monotonicStart) }

func newTTLCache(size int, ttl time.Duration) *ttlCache {
	c, err := lru.New[string, *ttlEntry](size)
	if err != nil {
		panic("redissession: token cache size must be positive") // callers default it
	}
	return &ttlCache{lru: c, ttl: ttl, now: sinceStart}
}

func (c *ttlCache) Get(token string) (domain.UserID, bool) {
	e, ok := c.entry(token, c.now())
	if !ok {
		return 0, false
	}
	return e.id, true
}

// entry returns the token's entry unless it is missing, lapsed at now, or
// stale (its slot's state moved since it was read).
func (c *ttlCache) entry(token string, now time.Duration) (*ttlEntry, bool) {
	e, ok := c.lru.Get(token)
	if !ok || !c.live(e, now) {
		return nil, false
	}
	return e, true
}

func (c *ttlCache) live(e *ttlEntry, now time.Duration) bool {
	return now < e.expires && (c.states == nil || c.states[e.slot].Load() == e.state)
}

// Add keeps the token for the cache's ttl.
func (c *ttlCache) Add(token string, id domain.UserID) { c.addIn(token, id, c.ttl, 0, 0) }

// addIn keeps the token for life, as read under its slot's state.
func (c *ttlCache) addIn(token string, id domain.UserID, life time.Duration, slot uint16, state uint64) {
	c.lru.Add(token, &ttlEntry{id: id, expires: c.now() + life, slot: slot, state: state})
}

// addUnlessLive keeps the token for life, as read under its slot's state,
// unless a live entry holds it, and returns the entry it added (nil when it
// kept the live one). A lapsed or stale entry is replaced.
func (c *ttlCache) addUnlessLive(token string, id domain.UserID, life time.Duration, slot uint16, state uint64) *ttlEntry {
	now := c.now()
	e := &ttlEntry{id: id, expires: now + life, slot: slot, state: state}
	prev, found, _ := c.lru.PeekOrAdd(token, e)
	if found {
		if c.live(prev, now) {
			return nil
		}
		c.lru.Add(token, e)
	}
	return e
}

// removeEntry removes the token if e is still its entry. The look and the
// removal are two steps: a caller that must not lose an entry added in
// between holds the lock its adders hold.
func (c *ttlCache) removeEntry(token string, e *ttlEntry) {
	if cur, ok := c.lru.Peek(token); ok && cur == e {
		c.lru.Remove(token)
	}
}

func (c *ttlCache) Remove(token string) { c.lru.Remove(token) }

func (c *ttlCache) Purge() { c.lru.Purge() }

func (c *ttlCache) Len() int { return c.lru.Len() }
