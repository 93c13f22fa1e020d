package redissession

import (
	"context"
	"time"

	"github.com/hmdp-go/seckill/adapters/internal/tokencache"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Defaults of CacheOptions.
const (
	DefaultCacheSize = 100_000
	DefaultCacheTTL  = 10 * time.Second
)

// CacheOptions bounds a Cached: at most Size tokens, each for at most TTL. A
// zero field takes its default; a caller that wants no cache (instant
// revocation) uses the Store itself, as the service does for
// a cache TTL of 0 (infra Tuning.TokenCacheTTL).
type CacheOptions struct {
	Size int
	TTL  time.Duration
}

// Cached remembers resolved tokens for a short while. Only successes are
// kept: caching "unknown" would make a freshly minted token fail for up to
// TTL, and would let random tokens fill the cache.
//
// Make one Cached per process, not per request: the cache is its state.
type Cached struct {
	next  ports.Sessions
	cache *tokencache.Cache[domain.UserID]
}

var _ ports.Sessions = (*Cached)(nil)

// NewCached panics on a nil next, a wiring mistake that must stop the start.
func NewCached(next ports.Sessions, opts CacheOptions) *Cached {
	if next == nil {
		panic("redissession: NewCached needs a non-nil Sessions")
	}
	if opts.Size <= 0 {
		opts.Size = DefaultCacheSize
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultCacheTTL
	}
	return &Cached{next: next, cache: tokencache.New[domain.UserID](opts.Size, opts.TTL)}
}

func (c *Cached) UserID(ctx context.Context, token string) (domain.UserID, error) {
	if token == "" || len(token) > maxTokenLen {
		return 0, ports.ErrUnknownToken
	}
	if id, ok := c.cache.Get(token); ok {
		return id, nil
	}
	id, err := c.next.UserID(ctx, token)
	if err != nil {
		return 0, err
	}
	c.cache.Add(token, id)
	return id, nil
}
