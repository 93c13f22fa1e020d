package redissession

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Tracked is the session cache Redis keeps honest: a token resolved once is
// answered from memory (no Redis on the hot path), and Redis tells this
// process the moment a session key changes, so a deleted (revoked) or
// expired token stops resolving on every instance at once, not a cache TTL
// later.
//
// How: one subscriber connection per Redis master runs CLIENT TRACKING in
// broadcast mode on the session prefix, redirected to itself, and listens on
// __redis__:invalidate (RESP2), so every write to any login:token:* key
// (DEL, EXPIRE, expiry, HSET) arrives as a message naming the key, in the
// order Redis applied them. While a subscriber is down nothing is served from
// memory (every request asks Redis), and when it is back the cache starts
// empty: invalidations missed in between cannot leave a revoked token behind.
//
// Sliding expiry, as the original's RefreshTokenInterceptor: a lookup that
// misses the cache reads HGET and PTTL in one round trip (plain commands: a
// script cost Redis three times as much), then PEXPIRE <TTL> only when less
// than TTL - slack is left, and an entry lives at most Period, so
// a user who keeps making requests has their session pushed back to TTL after
// the last of them, within one Period plus the slack. The refresh is a write
// like any other: its report evicts the token here and on every instance,
// and the next request looks it up again (no write then: the TTL is fresh).
// So a refresh costs three round trips per token per slack period across
// the whole fleet, a first request one, and a request in between none.
//
// Every report evicts; a lookup caches its answer only if no report of its
// key's shard arrived while it was in flight, so a DEL racing the lookup can
// never leave its token cached.
type Tracked struct {
	store  *Store
	period time.Duration
	cache  *ttlCache

	// epochs count the reports per shard of keys; a lookup caches its
	// answer only if its key's shard saw none while it was in flight.
	// Sharded so that a burst of logins (each HSET is reported) does not
	// keep every concurrent lookup from caching.
	epochs [epochShards]atomic.Uint64
	// down counts subscribers that are not (yet) listening; the cache
	// serves only at zero.
	down atomic.Int64

	// reports counts the reports applied (for tests and metrics).
	reports atomic.Int64

	subs    []*redis.PubSub
	clients []*redis.Client
	cancel  context.CancelFunc
	done    sync.WaitGroup
}

var _ ports.Sessions = (*Tracked)(nil)

// ErrTrackingUnsupported: the server refused CLIENT TRACKING (an embedded
// miniredis, a proxy); the caller falls back to a TTL-bounded cache or none.
var ErrTrackingUnsupported = errors.New("redis does not support CLIENT TRACKING")

// TrackedOptions configures a Tracked.
type TrackedOptions struct {
	// Size bounds the cache (default DefaultCacheSize).
	Size int
	// Period is how long an entry lives, hence how often a user's session
	// is refreshed while they keep making requests (default DefaultCacheTTL).
	Period time.Duration
}

// NewTracked starts one invalidation subscriber per master of rdb (a Client
// or a ClusterClient; masters are those known at start) and returns once
// each is listening. It fails with ErrTrackingUnsupported when the server
// does not track. Close stops the subscribers.
func NewTracked(ctx context.Context, rdb redis.UniversalClient, store *Store, opts TrackedOptions) (*Tracked, error) {
	if rdb == nil || store == nil {
		panic("redissession: NewTracked needs a Redis client and a Store")
	}
	if opts.Size <= 0 {
		opts.Size = DefaultCacheSize
	}
	if opts.Period <= 0 {
		opts.Period = DefaultCacheTTL
	}
	var nodes []*redis.Options
	switch c := rdb.(type) {
	case *redis.Client:
		nodes = append(nodes, c.Options())
	case *redis.ClusterClient:
		var mu sync.Mutex
		err := c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			nodes = append(nodes, m.Options())
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list redis masters: %w", err)
		}
	default:
		return nil, fmt.Errorf("redissession: tracking needs a go-redis Client or ClusterClient, got %T", rdb)
	}
	t := &Tracked{
		store:  store,
		period: opts.Period,
		cache:  newTTLCache(opts.Size, opts.Period),
	}
	t.down.Store(int64(len(nodes)))
	runCtx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	for _, o := range nodes {
		ps, err := t.subscribe(ctx, o)
		if err != nil {
			_ = t.Close()
			return nil, err
		}
		t.subs = append(t.subs, ps)
		t.done.Add(1)
		go t.listen(runCtx, ps)
	}
	return t, nil
}

// subscribe opens a subscriber on one node. Its client makes every
// connection it dials (the first and any reconnection) track the session
// prefix, redirected to itself, before it subscribes.
func (t *Tracked) subscribe(ctx context.Context, node *redis.Options) (*redis.PubSub, error) {
	o := *node
	o.Protocol = 2 // invalidations as pub/sub messages on this very connection
	o.PoolSize = 1
	o.MinIdleConns = 0
	o.MaxRetries = -1
	prefix := t.store.prefix
	o.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
		id, err := cn.ClientID(ctx).Result()
		if err != nil {
			return err
		}
		return cn.Do(ctx, "client", "tracking", "on", "redirect", id, "bcast", "prefix", prefix).Err()
	}
	c := redis.NewClient(&o)
	t.clients = append(t.clients, c)
	ps := c.Subscribe(ctx) // connects lazily, on the first SUBSCRIBE
	if err := ps.Subscribe(ctx, "__redis__:invalidate"); err != nil {
		_ = ps.Close()
		if isUnsupported(err) {
			return nil, fmt.Errorf("%w: %v", ErrTrackingUnsupported, err)
		}
		return nil, fmt.Errorf("subscribe to session invalidations on %s: %w", node.Addr, err)
	}
	// The confirmation proves the connection tracks: OnConnect ran first.
	if _, err := ps.ReceiveTimeout(ctx, 5*time.Second); err != nil {
		_ = ps.Close()
		if isUnsupported(err) {
			return nil, fmt.Errorf("%w: %v", ErrTrackingUnsupported, err)
		}
		return nil, fmt.Errorf("subscribe to session invalidations on %s: %w", node.Addr, err)
	}
	t.down.Add(-1)
	return ps, nil
}

func isUnsupported(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "unknown") || strings.Contains(s, "not supported") || strings.Contains(s, "tracking")
}

// heartbeat is how long a subscriber waits for a message before it pings,
// so a dead connection is noticed (and the cache stops serving) within
// about twice this.
const heartbeat = time.Second

// listen applies one subscriber's invalidations until Close. A failed
// read marks the subscriber down (the cache stops serving and empties);
// the next read reconnects, and the subscription confirmation marks it up.
func (t *Tracked) listen(ctx context.Context, ps *redis.PubSub) {
	defer t.done.Done()
	up := true
	markDown := func() {
		if up {
			up = false
			t.down.Add(1)
			t.flush()
		}
	}
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, heartbeat)
		if err != nil {
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() && up {
				if perr := ps.Ping(ctx); perr == nil {
					continue
				}
			}
			markDown()
			if ctx.Err() == nil {
				// Each failed read redials; do not spin on a dead node.
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			// A (re)subscription: invalidations may have been missed.
			t.flush()
			if !up {
				up = true
				t.down.Add(-1)
			}
		case *redis.Message:
			if len(m.PayloadSlice) == 0 && m.Payload == "" {
				t.flush() // FLUSHDB / FLUSHALL: every key is gone
				continue
			}
			keys := m.PayloadSlice
			if len(keys) == 0 {
				keys = []string{m.Payload}
			}
			for _, k := range keys {
				t.invalidate(k)
			}
		}
	}
}

const epochShards = 64

func (t *Tracked) epoch(key string) *atomic.Uint64 {
	// FNV-1a: cheap, and spreads random tokens evenly.
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return &t.epochs[h%epochShards]
}

// invalidate evicts a session key's token. The epoch moves first, so a
// lookup of that key in flight does not cache what it read before the
// write.
func (t *Tracked) invalidate(key string) {
	t.epoch(key).Add(1)
	t.cache.Remove(strings.TrimPrefix(key, t.store.prefix))
	t.reports.Add(1)
}

func (t *Tracked) flush() {
	for i := range t.epochs {
		t.epochs[i].Add(1)
	}
	t.cache.Purge()
}

// UserID answers from memory while every subscriber listens; otherwise, or
// on a miss, it asks Redis and refreshes the session's TTL in the same round
// trip.
func (t *Tracked) UserID(ctx context.Context, token string) (domain.UserID, error) {
	if token == "" || len(token) > maxTokenLen {
		return 0, ports.ErrUnknownToken
	}
	serving := t.down.Load() == 0
	if serving {
		if id, ok := t.cache.Get(token); ok {
			return id, nil
		}
	}
	epoch := t.epoch(t.store.prefix + token)
	seen := epoch.Load()
	id, err := t.store.lookup(ctx, token, true)
	if err != nil {
		return 0, err
	}
	// Add, then check: an invalidation after the check finds the entry and
	// evicts it; one before it moved the epoch, and the entry goes again.
	if serving {
		t.cache.Add(token, id)
		if epoch.Load() != seen || t.down.Load() != 0 {
			t.cache.Remove(token)
		}
	}
	return id, nil
}

// Reports tells how many invalidation reports were applied.
func (t *Tracked) Reports() int64 { return t.reports.Load() }

// Close stops the subscribers.
func (t *Tracked) Close() error {
	if t.cancel != nil {
		t.cancel()
	}
	var errs []error
	for _, ps := range t.subs {
		errs = append(errs, ps.Close())
	}
	t.done.Wait()
	for _, c := range t.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
