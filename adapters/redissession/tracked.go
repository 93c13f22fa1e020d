package redissession

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Tracked is the session cache Redis keeps honest: a token is answered from
// memory (no Redis on the hot path), and Redis tells this process the moment
// a session key changes, so a deleted (revoked) or expired token stops
// resolving on every instance at once.
//
// How: one subscriber connection per Redis master runs CLIENT TRACKING in
// broadcast mode on the session prefix, redirected to itself, and listens on
// __redis__:invalidate (RESP2), so every write to any login:token:* key
// (DEL, EXPIRE, expiry, HSET) arrives as a message naming the key, in the
// order Redis applied them. While a subscriber is down nothing is served from
// memory (every request asks Redis), and when it is back the cache starts
// empty: invalidations missed in between cannot leave a revoked token behind.
//
// On a Redis Cluster the masters are listed again every TopologyPoll (CLUSTER
// SLOTS). A master that appears (a failover, a node added) gets a subscriber,
// and nothing is served from memory until it listens; the cache is emptied
// then. A master that leaves is dropped. While the masters cannot be listed,
// nothing is served from memory. So the one report this process can miss is
// a write to a master that joined less than one poll ago.
//
// Prefetching: every report names a session key that was just written,
// most often by a login. The report evicts the token, then the token is read
// back (HGET and PTTL, pipelined with other reported tokens, no refresh) and
// cached for as long as the session lives. So a user who logged in before the
// sale finds their session in memory on their first claim, on every instance.
// A login costs each instance one pipelined read. The queue of tokens to read
// is bounded; a token that does not fit is looked up on its first request,
// as without prefetching.
//
// Sliding expiry, as the original's RefreshTokenInterceptor: each entry
// knows when its session expires in Redis. A request answered from memory
// when less than TTL - slack is left sends one PEXPIRE <TTL> (not awaited: it
// rides with the request's own pipelined batch). Its report evicts the token
// everywhere and prefetching reads it back with its new expiry. A lookup that
// misses reads HGET and PTTL in one round trip and sends the same PEXPIRE when
// due. So a user who keeps making requests has their session pushed back to
// TTL after the last of them within the slack, at the cost of one write per
// token per slack across the whole fleet.
//
// Every report evicts; a lookup or a prefetch caches its answer only if no
// report of its key arrived while it was in flight, so a DEL racing either
// can never leave its token cached.
type Tracked struct {
	store *Store
	cache *ttlCache

	// epochs count the reports per shard of keys; a lookup caches its
	// answer only if its key's shard saw none while it was in flight.
	// Sharded so that a burst of logins (each HSET is reported) does not
	// keep every concurrent lookup from caching.
	epochs [epochShards]atomic.Uint64
	// down counts what keeps the cache from serving: subscribers that are
	// not (yet) listening, and a cluster whose masters could not be listed.
	down atomic.Int64

	// pending are the tokens a prefetch is reading, each marked true once a
	// report of it (or a flush) arrives; a marked token is not cached. Per
	// token, not per shard as the epochs: read-backs run while logins are
	// reported in bursts that move every shard, and would rarely cache. The
	// epochs stay for the request path, where they cost no lock.
	pmu      sync.Mutex
	pending  map[string]bool
	npending atomic.Int64
	queue    chan string

	// Counters, for tests and metrics.
	reports, prefetched, skipped, polls atomic.Int64

	template *redis.Options
	masters  func(context.Context) ([]string, error) // nil: one node
	poll     time.Duration
	tick     <-chan time.Time // tests: drives the topology watch by hand
	// afterRead, in tests, runs between a prefetch's read and its caching;
	// afterDown after a subscriber's failed read marked the cache down;
	// afterLookup in a request's miss, after its read (stage lookupRead)
	// and after it cached the answer (lookupAdded).
	afterRead, afterDown func()
	afterLookup          func(stage string)

	mu     sync.Mutex // guards subs
	subs   map[string]*subscriber
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup
}

var _ ports.Sessions = (*Tracked)(nil)

// ErrTrackingUnsupported: the server refused CLIENT TRACKING (an embedded
// miniredis, a proxy); the caller falls back to a TTL-bounded cache or none.
var ErrTrackingUnsupported = errors.New("redis does not support CLIENT TRACKING")

// Defaults of TrackedOptions.
const (
	DefaultTopologyPoll = time.Second
	// prefetchQueue bounds the tokens waiting to be read back; at 48 bytes
	// a string header and a 32-byte token, about 5 MB when full.
	prefetchQueue = 1 << 16
	// prefetchBatch is how many tokens one pipelined read carries.
	prefetchBatch = 256
)

// TrackedOptions configures a Tracked.
type TrackedOptions struct {
	// Size bounds the cache (default DefaultCacheSize).
	Size int
	// NoPrefetch turns off reading reported sessions back: a token is then
	// cached on its first request only.
	NoPrefetch bool
	// TopologyPoll is how often a cluster's masters are listed (default
	// DefaultTopologyPoll); the longest a revocation written to a new master
	// can go unheard.
	TopologyPoll time.Duration

	masters              func(context.Context) ([]string, error)
	tick                 <-chan time.Time
	afterRead, afterDown func()
	afterLookup          func(stage string)
}

// NewTracked starts one invalidation subscriber per master of rdb (a Client
// or a ClusterClient, whose masters it keeps following) and returns once
// each is listening. It fails with ErrTrackingUnsupported when the server
// does not track. Close stops the subscribers.
func NewTracked(ctx context.Context, rdb redis.UniversalClient, store *Store, opts TrackedOptions) (*Tracked, error) {
	if rdb == nil || store == nil {
		panic("redissession: NewTracked needs a Redis client and a Store")
	}
	if opts.Size <= 0 {
		opts.Size = DefaultCacheSize
	}
	if opts.TopologyPoll <= 0 {
		opts.TopologyPoll = DefaultTopologyPoll
	}
	t := &Tracked{
		store:       store,
		cache:       newTTLCache(opts.Size, store.ttl),
		pending:     make(map[string]bool),
		masters:     opts.masters,
		poll:        opts.TopologyPoll,
		tick:        opts.tick,
		afterRead:   opts.afterRead,
		afterDown:   opts.afterDown,
		afterLookup: opts.afterLookup,
		subs:        make(map[string]*subscriber),
	}
	if !opts.NoPrefetch {
		t.queue = make(chan string, prefetchQueue) // before any listener runs
	}
	var addrs []string
	switch c := rdb.(type) {
	case *redis.Client:
		t.template = c.Options()
		if t.masters == nil {
			addrs = []string{t.template.Addr}
		}
	case *redis.ClusterClient:
		// Every node of a cluster is dialled with the same options but
		// its address; take them from one master.
		var once sync.Once
		err := c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
			once.Do(func() { t.template = m.Options() })
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list redis masters: %w", err)
		}
		if t.masters == nil {
			t.masters = func(ctx context.Context) ([]string, error) { return clusterMasters(ctx, c) }
		}
	default:
		return nil, fmt.Errorf("redissession: tracking needs a go-redis Client or ClusterClient, got %T", rdb)
	}
	if t.masters != nil {
		var err error
		if addrs, err = t.masters(ctx); err != nil {
			return nil, fmt.Errorf("list redis masters: %w", err)
		}
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	for _, addr := range addrs {
		if err := t.addSubscriber(ctx, addr, true); err != nil {
			_ = t.Close()
			return nil, err
		}
	}
	if t.masters != nil {
		t.done.Add(1)
		go t.watch()
	}
	if t.queue != nil {
		t.done.Add(1)
		go t.prefetchLoop()
	}
	return t, nil
}

// UserID answers from memory while every subscriber listens (sliding the
// session's expiry when due); otherwise, or on a miss, it asks Redis and
// refreshes the session's TTL in the same round trip.
func (t *Tracked) UserID(ctx context.Context, token string) (domain.UserID, error) {
	if token == "" || len(token) > maxTokenLen {
		return 0, ports.ErrUnknownToken
	}
	serving := t.down.Load() == 0
	if serving {
		now := t.cache.now()
		if e, ok := t.cache.entry(token, now); ok {
			t.slide(ctx, token, e, now)
			return e.id, nil
		}
	}
	epoch := t.epoch(t.store.prefix + token)
	seen := epoch.Load()
	id, life, err := t.store.lookup(ctx, token, true)
	if err != nil {
		return 0, err
	}
	t.hook(lookupRead)
	if serving && life > 0 {
		t.keep(token, id, life, epoch, seen)
	}
	return id, nil
}

// Stages of a request's miss at which afterLookup runs.
const (
	lookupRead  = "read"
	lookupAdded = "add"
)

func (t *Tracked) hook(stage string) {
	if t.afterLookup != nil {
		t.afterLookup(stage)
	}
}

// keep caches what a request's miss read, unless the token moved meanwhile.
// Add, then check: an invalidation after the check finds the entry and
// evicts it; one before it moved the epoch, and the entry goes again.
//
// What goes is this request's entry only. The invalidation that moved the
// epoch also queued the token to be read back, and that read, being later
// than this one, may already have cached it (a request whose goroutine
// waited for a CPU between its read and here): a live entry found at the
// add is kept and this answer dropped, and the removal takes the entry only
// if it is still this one, under the lock under which read-backs cache, so
// none lands between the look and the removal. Dropping the read-back's
// entry would be safe, but would cost the token's next request a round trip.
func (t *Tracked) keep(token string, id domain.UserID, life time.Duration, epoch *atomic.Uint64, seen uint64) {
	e := t.cache.addUnlessLive(token, id, life)
	if e == nil {
		return
	}
	t.hook(lookupAdded)
	if epoch.Load() != seen || t.down.Load() != 0 {
		t.pmu.Lock()
		t.cache.removeEntry(token, e)
		t.pmu.Unlock()
	}
}

// slide sends the refresh of a cached session whose expiry is more than
// the slack behind TTL from now, at most once per slack per entry. Its
// report replaces the entry with one that knows the new expiry.
func (t *Tracked) slide(ctx context.Context, token string, e *ttlEntry, now time.Duration) {
	s := t.store
	if e.expires-now >= s.ttl-s.slack {
		return
	}
	last := e.refreshed.Load()
	if last != 0 && now-time.Duration(last) < s.slack {
		return
	}
	if e.refreshed.CompareAndSwap(last, int64(now)) {
		s.sendRefresh(ctx, s.prefix+token)
	}
}

// Reports tells how many invalidation reports were applied.
func (t *Tracked) Reports() int64 { return t.reports.Load() }

// Prefetched tells how many sessions were read back after a report and
// cached.
func (t *Tracked) Prefetched() int64 { return t.prefetched.Load() }

// Skipped tells how many reported tokens were not read back: the queue was
// full, or the cache was not serving.
func (t *Tracked) Skipped() int64 { return t.skipped.Load() }

// Holds tells whether token is in the cache and not lapsed, without
// touching its place in the LRU (for a bench that waits for logins to be
// read back).
func (t *Tracked) Holds(token string) bool {
	e, ok := t.cache.lru.Peek(token)
	return ok && t.cache.now() < e.expires
}

// Cached tells how many tokens the cache holds (lapsed ones included until
// they are pushed out).
func (t *Tracked) Cached() int { return t.cache.Len() }

// Close stops the subscribers, the topology watch and prefetching.
func (t *Tracked) Close() error {
	if t.cancel != nil {
		t.cancel()
	}
	t.done.Wait()
	t.mu.Lock()
	subs := t.subs
	t.subs = map[string]*subscriber{}
	t.mu.Unlock()
	for _, s := range subs {
		s.stop()
	}
	return nil
}
