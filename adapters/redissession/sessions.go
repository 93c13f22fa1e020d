package redissession

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/internal/tokencache"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Sessions resolves login tokens through the session cache. On a Redis that
// tracks (6+, single or cluster) a token is answered from memory, and Redis
// reports every write to a session key, so a revoked or expired token stops
// resolving on every instance at once. On a server that cannot track
// (miniredis) an entry lives at most CacheOptions.UntrackedTTL; with NoCache
// every request asks Redis.
//
// One subscriber per master runs CLIENT TRACKING in broadcast mode on the
// prefix, redirected to itself, and listens on __redis__:invalidate (RESP2).
// While a master's subscriber is down, or its slots just moved (the cluster is
// listed every topologyPoll), or the masters cannot be listed, its slots are
// not served from memory, and what was cached of them before is never served
// again: missed reports cannot leave a revoked token behind. The reports also
// fill the cache (prefetchLoop), and Warm reads what Redis held before the
// start. A read never caches what a report overtook (guard).
type Sessions struct {
	store     *Store
	cache     *tokencache.Cache[domain.UserID] // nil: NoCache
	untracked time.Duration                    // an entry's longest life when the server cannot track (0: it tracks)
	guard     guard
	// states holds, per slot, gen<<1 | slotDown. gen moves on every change of
	// the slot's owner or of whether it is served, so an entry (kept with the
	// state its read began under) is served only while nothing happened to its
	// slot. Written under mu; read without a lock.
	states [slotCount]atomic.Uint64
	queue  chan string // reported tokens to read back (nil: NoPrefetch)

	reports, prefetched, skipped, polls, downs atomic.Int64

	log      zerolog.Logger
	warm     warmUp
	size     int // the cache's bound, which the warm-up shares out
	template *redis.Options
	seams

	mu     sync.Mutex // guards subs, owner, closed and the subscribers' up and owns
	subs   map[string]*subscriber
	owner  [slotCount]*subscriber // nil: no known master serves the slot
	closed bool
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup // the watch, prefetching, warm-ups, removed subscribers' stops
}

var _ ports.Sessions = (*Sessions)(nil)

// errTrackingUnsupported: the server refused CLIENT TRACKING (miniredis, a proxy).
var errTrackingUnsupported = errors.New("redis does not support CLIENT TRACKING")

const (
	// DefaultUntrackedTTL: how long a revoked token may still resolve on an
	// instance that cached it, when the server cannot track.
	DefaultUntrackedTTL = 10 * time.Second
	// topologyPoll: the longest a revocation written to a new master can go unheard.
	topologyPoll  = time.Second
	prefetchQueue = 1 << 16 // about 5 MB of tokens when full
	prefetchBatch = 256
	readBackWait  = 5 * time.Second // bounds one pipelined read-back
)

// CacheOptions configures a Sessions.
type CacheOptions struct {
	Size         int           // default tokencache.DefaultSize
	NoCache      bool          // every request asks Redis and slides the session's expiry
	UntrackedTTL time.Duration // an entry's longest life when the server cannot track
	// NoPrefetch: reported sessions are not read back, only cached on a request.
	NoPrefetch bool
	// Log hears when a master's sessions stop being served from memory and
	// when they are again.
	Log zerolog.Logger
	seams
}

// seams are what tests set (export_test.go).
type seams struct {
	masters   func(context.Context) ([]master, error) // nil: one node, or CLUSTER SLOTS on a cluster
	tick      <-chan time.Time
	warmDuty  float64
	afterRead func() // between a read-back's read and its caching
	afterDown func() // after a failed read stopped a master's slots
	// afterLookup runs in a miss after its read ("read") and after it cached
	// or refused to ("add").
	afterLookup func(stage string)
	scanFault   func() error
}

// NewSessions starts one invalidation subscriber per master of rdb (a Client,
// or a ClusterClient whose masters it follows) and returns once each listens.
// On a server that does not track it returns the cache bounded by
// UntrackedTTL (Tracking tells which); with NoCache, no cache.
func NewSessions(ctx context.Context, rdb redis.UniversalClient, store *Store, opts CacheOptions) (*Sessions, error) {
	if rdb == nil || store == nil {
		panic("redissession: NewSessions needs a Redis client and a Store")
	}
	if opts.Size <= 0 {
		opts.Size = tokencache.DefaultSize
	}
	if opts.UntrackedTTL <= 0 {
		opts.UntrackedTTL = DefaultUntrackedTTL
	}
	if opts.afterLookup == nil {
		opts.afterLookup = func(string) {}
	}
	if !opts.NoCache {
		t, err := newTracked(ctx, rdb, store, opts)
		if !errors.Is(err, errTrackingUnsupported) {
			return t, err
		}
	}
	// Nothing to listen to, nor to warm (an entry would lapse before its use).
	t := &Sessions{store: store, seams: opts.seams}
	if !opts.NoCache {
		t.cache, t.untracked = tokencache.New[domain.UserID](opts.Size), opts.UntrackedTTL
	}
	t.warm.on, t.warm.ended = true, make(chan struct{})
	close(t.warm.ended)
	return t, nil
}

// newTracked fails with errTrackingUnsupported on a server that cannot track.
func newTracked(ctx context.Context, rdb redis.UniversalClient, store *Store, opts CacheOptions) (*Sessions, error) {
	t := &Sessions{store: store, cache: tokencache.New[domain.UserID](opts.Size), subs: make(map[string]*subscriber),
		size: opts.Size, log: opts.Log, seams: opts.seams}
	t.cache.States = t.states[:]
	t.warm.ended = make(chan struct{})
	for i := range t.states {
		t.states[i].Store(slotDown) // no slot is served before its master listens
	}
	if t.warmDuty <= 0 || t.warmDuty > 1 {
		t.warmDuty = DefaultWarmDuty
	}
	if !opts.NoPrefetch {
		t.queue = make(chan string, prefetchQueue)
	}
	switch c := rdb.(type) {
	case *redis.Client:
		t.template = c.Options()
	case *redis.ClusterClient:
		// Every node is dialled with the same options but its address.
		m, err := c.MasterForKey(ctx, store.prefix)
		if err != nil {
			return nil, fmt.Errorf("list redis masters: %w", err)
		}
		t.template = m.Options()
		if t.masters == nil {
			t.masters = func(ctx context.Context) ([]master, error) { return clusterMasters(ctx, c) }
		}
	default:
		return nil, fmt.Errorf("redissession: tracking needs a go-redis Client or ClusterClient, got %T", rdb)
	}
	ms := []master{{addr: t.template.Addr, slots: [][2]uint16{{0, slotCount - 1}}}}
	if t.masters != nil {
		var err error
		if ms, err = t.masters(ctx); err != nil {
			return nil, fmt.Errorf("list redis masters: %w", err)
		}
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	for _, m := range ms {
		if err := t.addSubscriber(ctx, m.addr, true); err != nil {
			_ = t.Close()
			return nil, err
		}
	}
	t.follow(ms) // nothing warms yet: Warm starts it
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

// UserID answers from memory when the token's entry is served (sliding the
// session's expiry when due); otherwise it asks Redis, which refreshes the TTL
// in the same round trip. Without tracking a hit is not slid: the miss after
// the entry lapses (UntrackedTTL) slides it.
func (t *Sessions) UserID(ctx context.Context, token string) (domain.UserID, error) {
	if !usable(token) {
		return 0, ports.ErrUnknownToken
	}
	if t.cache == nil {
		id, _, err := t.store.lookup(ctx, token)
		return id, err
	}
	now := t.cache.Now()
	if e, ok := t.cache.Entry(token, now); ok {
		if t.untracked == 0 {
			t.slide(ctx, token, e, now)
		}
		return e.Value, nil
	}
	r, serving := t.begin(t.store.prefix + token)
	id, life, err := t.store.lookup(ctx, token)
	if err != nil {
		return 0, err
	}
	t.afterLookup("read")
	if serving && life > 0 {
		if t.untracked > 0 {
			life = min(life, t.untracked)
		}
		t.keep(token, &r, id, life)
		t.afterLookup("add")
	}
	return id, nil
}

// Tracking tells whether Redis keeps the cache honest: false without tracking,
// with NoCache, or on a nil Sessions.
func (t *Sessions) Tracking() bool { return t != nil && t.cache != nil && t.untracked == 0 }

// slide sends, unawaited, the refresh of a cached session whose expiry is more
// than the slack behind TTL, at most once per slack per entry. Its report
// evicts the token and prefetching reads it back with its new expiry.
func (t *Sessions) slide(ctx context.Context, token string, e *tokencache.Entry[domain.UserID], now time.Duration) {
	s := t.store
	if e.Expires-now >= s.ttl-s.slack {
		return
	}
	last := e.Refreshed.Load()
	if last != 0 && now-time.Duration(last) < s.slack {
		return
	}
	if e.Refreshed.CompareAndSwap(last, int64(now)) {
		s.sendRefresh(ctx, s.prefix+token)
	}
}

// Downs tells how many times a subscriber stopped listening.
func (t *Sessions) Downs() int64 { return t.downs.Load() }

// Serving tells how many masters' subscribers listen (their sessions are
// served from memory), of how many.
func (t *Sessions) Serving() (listening, masters int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.subs {
		if s.up {
			listening++
		}
	}
	return listening, len(t.subs)
}

// Reports tells how many invalidation reports were applied.
func (t *Sessions) Reports() int64 { return t.reports.Load() }

// Cached tells how many tokens the cache holds, lapsed ones included.
func (t *Sessions) Cached() int {
	if t.cache == nil {
		return 0
	}
	return t.cache.Len()
}

// Prefetched tells how many reported sessions were read back and cached.
func (t *Sessions) Prefetched() int64 { return t.prefetched.Load() }

// Skipped tells how many reported tokens were not read back: the queue was
// full, or their slot was not served.
func (t *Sessions) Skipped() int64 { return t.skipped.Load() }

// Holds tells whether token would be served, without touching the LRU.
func (t *Sessions) Holds(token string) bool { return t.cache != nil && t.cache.Holds(token) }

// Close stops the subscribers, the topology watch, prefetching and the warm-up.
func (t *Sessions) Close() error {
	t.mu.Lock()
	t.closed = true // no warm-up starts after this
	t.mu.Unlock()
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
