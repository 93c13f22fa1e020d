package httpapi

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// DefaultPublicReadTTL is how long the public reads that cost a backend round
// trip (the voucher list, /readyz) are reused: a flood costs each instance one
// load per key per TTL, and a new voucher shows on others within it.
const DefaultPublicReadTTL = time.Second

// maxCachedShops bounds the list cache against a client walking shop ids.
const maxCachedShops = 4096

// loadTimeout bounds a shared load, which no one client's disconnect cancels.
const loadTimeout = 5 * time.Second

// shortCache keeps a read's result for ttl if keep(err), loads a key once for
// concurrent requests (singleflight), and holds at most max keys.
type shortCache[V any] struct {
	ttl   time.Duration
	max   int
	keep  func(error) bool
	group singleflight.Group

	mu    sync.Mutex
	gen   uint64 // bumped by forget: a load begun before it stores nothing
	items map[string]cachedRead[V]
}

type cachedRead[V any] struct {
	v     V
	err   error
	until time.Time
}

func newShortCache[V any](ttl time.Duration, max int, keep func(error) bool) *shortCache[V] {
	return &shortCache[V]{ttl: ttl, max: max, keep: keep, items: make(map[string]cachedRead[V])}
}

func (c *shortCache[V]) get(ctx context.Context, key string, load func(context.Context) (V, error)) (V, error) {
	c.mu.Lock()
	e, ok := c.items[key]
	c.mu.Unlock()
	if ok && time.Now().Before(e.until) {
		return e.v, e.err
	}
	r, _, _ := c.group.Do(key, func() (any, error) {
		c.mu.Lock()
		gen := c.gen
		e, ok := c.items[key]
		c.mu.Unlock()
		// A miss just before the last flight stored takes what it stored.
		if ok && time.Now().Before(e.until) {
			return e, nil
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		defer cancel()
		v, err := load(lctx)
		e = cachedRead[V]{v: v, err: err, until: time.Now().Add(c.ttl)}
		if c.ttl > 0 && c.keep(err) {
			c.store(key, e, gen)
		}
		return e, nil
	})
	e = r.(cachedRead[V])
	return e.v, e.err
}

func (c *shortCache[V]) store(key string, e cachedRead[V], gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if _, ok := c.items[key]; !ok && len(c.items) >= c.max {
		now := time.Now()
		for k, old := range c.items {
			if !now.Before(old.until) {
				delete(c.items, k)
			}
		}
		if len(c.items) >= c.max {
			clear(c.items)
		}
	}
	c.items[key] = e
}

// forget drops key and makes a load under way store nothing, so this
// instance reads its own writes.
func (c *shortCache[V]) forget(key string) {
	c.mu.Lock()
	c.gen++
	delete(c.items, key)
	c.mu.Unlock()
	c.group.Forget(key)
}
