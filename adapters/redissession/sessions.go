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

// Sessions resolves login tokens through the one session cache, whatever the
// Redis behind it. On a Redis that tracks (CLIENT TRACKING: every real Redis
// from 6, single or cluster) a token is answered from memory (no Redis on
// the hot path), and Redis tells this process the moment a session key
// changes, so a deleted (revoked) or expired token stops resolving on every
// instance at once. On a server that cannot track (the embedded miniredis)
// the same cache keeps each answer for at most CacheOptions.UntrackedTTL, the
// bound within which a revocation is seen. With CacheOptions.NoCache every
// request asks Redis (and slides the session's expiry).
//
// How: one subscriber connection per Redis master runs CLIENT TRACKING in
// broadcast mode on the session prefix, redirected to itself, and listens on
// __redis__:invalidate (RESP2), so every write to any login:token:* key
// (DEL, EXPIRE, expiry, HSET) arrives as a message naming the key, in the
// order Redis applied them. A failure stays where it happened: while a
// master's subscriber is down, the tokens whose slot that master serves are
// not served from memory (each request asks Redis), and the entries cached
// from it before are never served again, so invalidations missed in between
// cannot leave a revoked token behind; the other masters' tokens are still
// served. (A single Redis is one master serving every slot.)
//
// On a Redis Cluster the masters and their slots are listed again every
// topologyPoll (CLUSTER SLOTS). A master that appears (a failover, a node
// added) gets a subscriber, and the slots it took are not served from
// memory until it listens; what was cached of them before is dropped then.
// A master that leaves is dropped. While the masters cannot be listed,
// nothing is served from memory. So the one report this process can miss is
// a write to a master that took its slots less than one poll ago.
//
// The same reports fill the cache: each reported token (most are a login's)
// is read back (prefetchLoop), and Warm reads what Redis held before the
// start, so a user finds their session in memory on their first claim. A hit
// slides the session's expiry (slide). Every report evicts, and no read
// caches what a report overtook (guard.go), so a DEL racing a read can never
// leave its token served.
type Sessions struct {
	store *Store
	cache *tokencache.Cache[domain.UserID] // nil: NoCache
	// untracked is the bound of an entry's life when the server cannot
	// track (0: it tracks).
	untracked time.Duration

	guard guard // a read overtaken by a report of its key caches nothing
	// states holds, per slot, gen<<1 | slotDown. Every change of a slot's
	// owner or of whether it is served moves gen, which never comes back, so
	// an entry (kept with the state its read began under) is served, and a
	// read cached, only while nothing happened to its slot since. Written
	// under mu only; read without a lock.
	states [slotCount]atomic.Uint64
	queue  chan string // reported tokens to read back (nil: NoPrefetch)

	// Counters, for tests and metrics; downs (Downs) is what an operator
	// watches to see the cache not serving.
	reports, prefetched, skipped, polls, downs atomic.Int64

	log  zerolog.Logger
	warm warmUp
	size int // the cache's bound, which the warm-up shares out

	template *redis.Options
	seams

	mu sync.Mutex // guards subs, owner, closed and the subscribers' up and owns
	// subs are the subscribers by master address; owner is each slot's
	// master's subscriber (nil: no known master serves it, or the masters
	// could not be listed).
	subs   map[string]*subscriber
	owner  [slotCount]*subscriber
	closed bool
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup // the watch, prefetching, warm-ups, removed subscribers' stops
}

var _ ports.Sessions = (*Sessions)(nil)

// errTrackingUnsupported: the server refused CLIENT TRACKING (an embedded
// miniredis, a proxy); the cache then bounds its entries' life instead.
var errTrackingUnsupported = errors.New("redis does not support CLIENT TRACKING")

// Defaults of CacheOptions.
const (
	// DefaultUntrackedTTL: a revoked token resolves for up to this long
	// on an instance that cached it, when the server cannot track.
	DefaultUntrackedTTL = 10 * time.Second
	// topologyPoll is how often a cluster's masters are listed: the longest
	// a revocation written to a new master can go unheard.
	topologyPoll = time.Second
	// prefetchQueue bounds the tokens waiting to be read back; at 48 bytes
	// a string header and a 32-byte token, about 5 MB when full.
	prefetchQueue = 1 << 16
	// prefetchBatch is how many tokens one pipelined read carries.
	prefetchBatch = 256
	// readBackWait bounds one pipelined read-back (a prefetch's or a
	// warm-up round's).
	readBackWait = 5 * time.Second
)

// CacheOptions configures a Sessions.
type CacheOptions struct {
	// Size bounds the cache (default tokencache.DefaultSize).
	Size int
	// NoCache: every request asks Redis and slides the session's expiry.
	NoCache bool
	// UntrackedTTL bounds each entry's life on a server that cannot track
	// (default DefaultUntrackedTTL); unused when it tracks.
	UntrackedTTL time.Duration
	// NoPrefetch turns off reading reported sessions back: a token is then
	// cached on its first request only.
	NoPrefetch bool
	// Log hears when a master's sessions stop being served from memory and
	// when they are again (default: discarded).
	Log zerolog.Logger

	seams
}

// seams are what tests set (export_test.go) and a Sessions keeps.
type seams struct {
	masters  func(context.Context) ([]master, error) // a test's, or CLUSTER SLOTS on a cluster (nil: one node)
	tick     <-chan time.Time                        // drives the topology watch by hand
	warmDuty float64                                 // the fraction of time a warm-up keeps Redis busy
	// afterRead runs between a read-back's read and its caching; afterDown
	// after a subscriber's failed read stopped its master's slots;
	// afterLookup in a request's miss, after its read (stage "read") and
	// after it cached the answer or refused to ("add").
	afterRead, afterDown func()
	afterLookup          func(stage string)
	scanFault            func() error // an error it returns fails a warm-up's SCAN
}

// NewSessions starts one invalidation subscriber per master of rdb (a Client
// or a ClusterClient, whose masters it keeps following) and returns once
// each is listening. On a server that does not track it returns the cache
// bounded by UntrackedTTL instead (Tracking tells which); with NoCache, no
// cache. Close stops the subscribers.
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
	// No cache, or one no report keeps honest: nothing to listen to, and
	// nothing to warm (an entry would lapse before its first use).
	t := &Sessions{store: store, seams: opts.seams}
	if !opts.NoCache {
		t.cache, t.untracked = tokencache.New[domain.UserID](opts.Size), opts.UntrackedTTL
	}
	t.warm.on, t.warm.ended = true, make(chan struct{}) // Warm does nothing
	close(t.warm.ended)
	return t, nil
}

// newTracked is NewSessions on a server that tracks; it fails with
// errTrackingUnsupported on one that does not.
func newTracked(ctx context.Context, rdb redis.UniversalClient, store *Store, opts CacheOptions) (*Sessions, error) {
	t := &Sessions{
		store: store,
		cache: tokencache.New[domain.UserID](opts.Size),
		subs:  make(map[string]*subscriber),
		size:  opts.Size,
		log:   opts.Log,
		seams: opts.seams,
	}
	t.cache.States = t.states[:]
	t.warm.ended = make(chan struct{})
	for i := range t.states {
		t.states[i].Store(slotDown) // no slot is served before its master listens
	}
	if t.warmDuty <= 0 || t.warmDuty > 1 {
		t.warmDuty = DefaultWarmDuty
	}
	if !opts.NoPrefetch {
		t.queue = make(chan string, prefetchQueue) // before any listener runs
	}
	switch c := rdb.(type) {
	case *redis.Client:
		t.template = c.Options()
	case *redis.ClusterClient:
		// Every node of a cluster is dialled with the same options but
		// its address; take them from one master.
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
	ms := []master{{addr: t.template.Addr, slots: [][2]uint16{{0, slotCount - 1}}}} // a single Redis serves every slot
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
	t.follow(ms) // gives the masters their slots; nothing warms yet: Warm starts it
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

// UserID answers from memory when the token's entry was read while its
// master's subscriber listened and nothing happened to its slot since
// (sliding the session's expiry when due); otherwise it asks Redis and
// refreshes the session's TTL in the same round trip.
//
// Without tracking, an entry is kept for at most UntrackedTTL and not slid on
// a hit: the miss that follows its lapse slides the session, so an active
// user's session is pushed back at least every UntrackedTTL.
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

// Tracking tells whether Redis keeps the cache honest (CLIENT TRACKING);
// false when the server cannot track (entries live at most UntrackedTTL)
// or with NoCache, or on a nil Sessions.
func (t *Sessions) Tracking() bool { return t != nil && t.cache != nil && t.untracked == 0 }

// slide sends the refresh of a cached session whose expiry is more than
// the slack behind TTL from now (PEXPIRE <TTL>, riding unawaited with the
// request's own batch), at most once per slack per entry (see
// Store.lookup). Its report evicts the token everywhere and prefetching
// reads it back with its new expiry.
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

// Serving tells how many masters' subscribers listen, of how many: their
// sessions are served from memory; the others' are read on every request.
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

// Cached tells how many tokens the cache holds (lapsed and stale ones
// included until they are pushed out or replaced).
func (t *Sessions) Cached() int {
	if t.cache == nil {
		return 0
	}
	return t.cache.Len()
}

// Prefetched tells how many sessions were read back after a report and
// cached.
func (t *Sessions) Prefetched() int64 { return t.prefetched.Load() }

// Skipped tells how many reported tokens were not read back: the queue was
// full, or their slot was not served.
func (t *Sessions) Skipped() int64 { return t.skipped.Load() }

// Holds tells whether token is in the cache and would be served, without
// touching its place in the LRU (for a bench that waits for logins to be
// read back).
func (t *Sessions) Holds(token string) bool {
	return t.cache != nil && t.cache.Holds(token)
}

// Close stops the subscribers, the topology watch, prefetching and the
// warm-up.
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
