package redissession

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/internal/tokencache"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Sessions resolves login tokens through the session cache. On a tracking Redis
// (6+) a token is answered from memory and a revoked one stops resolving on every
// instance at once: a master's slots whose reports may have been missed are not
// served, nor is what was cached of them before. Without tracking an entry lives
// at most CacheOptions.UntrackedTTL; with NoCache every request asks Redis.
type Sessions struct {
	store     *Store
	cache     *tokencache.Cache[domain.UserID] // nil: NoCache
	untracked time.Duration                    // an entry's longest life when the server cannot track (0: it tracks)
	guard     guard
	// states holds per slot gen<<1 | slotDown; gen moves whenever the slot's owner or
	// servedness changes, so an entry is served only while its read's state holds. Written under mu.
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

type CacheOptions struct {
	Size         int            // default tokencache.DefaultSize
	NoCache      bool           // every request asks Redis and slides the session's expiry
	UntrackedTTL time.Duration  // an entry's longest life when the server cannot track
	NoPrefetch   bool           // reported sessions are not read back, only cached on a request
	Log          zerolog.Logger // hears when a master's sessions stop, and start again, being served from memory
	seams
}

// seams are what tests set (export_test.go).
type seams struct {
	masters     func(context.Context) ([]master, error) // nil: one node, or CLUSTER SLOTS on a cluster
	tick        <-chan time.Time
	warmDuty    float64
	afterRead   func()             // between a read-back's read and its caching
	afterDown   func()             // after a failed read stopped a master's slots
	afterLookup func(stage string) // in a miss, after its read ("read") and after it cached or refused to ("add")
	scanFault   func() error
}

// NewSessions starts one invalidation subscriber per master of rdb (a Client or
// a ClusterClient) and returns once each listens. On a server that does not track
// it returns the cache bounded by UntrackedTTL (see Tracking); with NoCache, none.
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

// UserID answers from memory when the token's entry is served (sliding the session's
// expiry when due, if tracked); otherwise it asks Redis, which refreshes the TTL.
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

// Tracking tells whether Redis keeps the cache honest: false without tracking, with NoCache, or on nil.
func (t *Sessions) Tracking() bool { return t != nil && t.cache != nil && t.untracked == 0 }

// slide sends, unawaited, the refresh of a cached session more than the slack
// behind TTL, at most once per slack per entry; its report evicts the token.
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

// Serving tells how many masters' subscribers listen (served from memory), of how many.
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

// Cached tells how many tokens the cache holds, lapsed ones included.
func (t *Sessions) Cached() int {
	if t.cache == nil {
		return 0
	}
	return t.cache.Len()
}

// Counters: Downs, times a subscriber stopped listening; Reports, reports applied;
// Prefetched, reported sessions read back and cached; Skipped, those not read back.
func (t *Sessions) Downs() int64      { return t.downs.Load() }
func (t *Sessions) Reports() int64    { return t.reports.Load() }
func (t *Sessions) Prefetched() int64 { return t.prefetched.Load() }
func (t *Sessions) Skipped() int64    { return t.skipped.Load() }

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

// guard keeps a read from caching what a report of its key overtook. A key's mark is
// a hashed word: n (reports there), the last reported key's tag and n when that key's
// run began (a login reports twice); a read caches if its word's reports since are all another key's.
type guard struct {
	mu    sync.Mutex
	words [guardWords]atomic.Uint64 // n<<48 | run's start<<32 | tag, written under mu
}

const guardWords = 1 << 14 // 128 KiB

// guardSeed is random per process, so no one can choose tokens sharing another user's word.
var guardSeed = maphash.MakeSeed()

func (g *guard) word(key string) (*atomic.Uint64, uint32) {
	h := maphash.String(guardSeed, key)
	return &g.words[h%guardWords], uint32(h >> 32)
}

// report marks a report of key. The caller holds mu.
func (g *guard) report(key string) {
	w, tag := g.word(key)
	old := w.Load()
	n, from := uint16(old>>48)+1, uint16(old>>32)
	if uint32(old) != tag {
		from = n - 1 // this key's run begins
	}
	w.Store(uint64(n)<<48 | uint64(from)<<32 | uint64(tag))
}

// reading is a read in flight: its slot, the slot's state and key's word when it began, and its key's tag.
type reading struct {
	slot       uint16
	state, was uint64
	word       *atomic.Uint64
	tag        uint32
}

// quiet tells whether the reports since r began, if any, are all in another key's last run. Under mu.
func (r *reading) quiet() bool {
	now := r.word.Load()
	since, run := uint16(now>>48)-uint16(r.was>>48), uint16(now>>48)-uint16(now>>32)
	return since == 0 || since <= run && uint32(now) != r.tag
}

// begin starts a read of key before it is sent; ok is false when key's slot is not served.
func (t *Sessions) begin(key string) (r reading, ok bool) {
	r.slot = redisschema.Slot(key)
	r.state = t.states[r.slot].Load()
	r.word, r.tag = t.guard.word(key)
	r.was = r.word.Load()
	return r, r.state&slotDown == 0
}

// keep caches token's answer for life unless the guard refuses or the slot's state moved; it tells whether it cached.
func (t *Sessions) keep(token string, r *reading, id domain.UserID, life time.Duration) bool {
	t.guard.mu.Lock()
	defer t.guard.mu.Unlock()
	if !r.quiet() || t.states[r.slot].Load() != r.state {
		return false
	}
	t.cache.AddFor(token, id, life, r.slot, r.state)
	return true
}

// invalidate marks a reported key and evicts its token in one step, and queues the token to be read back.
func (t *Sessions) invalidate(key string) {
	token := strings.TrimPrefix(key, t.store.prefix)
	t.guard.mu.Lock()
	t.guard.report(key)
	t.cache.Remove(token)
	t.guard.mu.Unlock()
	t.reports.Add(1)
	if t.queue != nil && usable(token) {
		select {
		case t.queue <- token:
		default:
			t.skipped.Add(1) // looked up on its first request instead
		}
	}
}

// prefetchLoop reads reported tokens back in batches of what queued up meanwhile.
func (t *Sessions) prefetchLoop() {
	defer t.done.Done()
	batch := make([]string, 0, prefetchBatch)
	for {
		select {
		case <-t.ctx.Done():
			return
		case token := <-t.queue:
			batch = append(batch[:0], token)
		}
		for len(batch) < prefetchBatch && len(t.queue) > 0 {
			batch = append(batch, <-t.queue) // the one reader: no wait
		}
		cached, skipped := t.readBack(t.ctx, t.store.rdb, batch)
		t.prefetched.Add(int64(cached))
		t.skipped.Add(int64(skipped))
	}
}

// readBack reads tokens' sessions (HGET and PTTL, no refresh) in one pipeline and
// caches those that live through keep; tokens whose slot is not served are skipped.
func (t *Sessions) readBack(ctx context.Context, rdb redis.Cmdable, tokens []string) (cached, skipped int) {
	type read struct {
		token string
		reading
		get *redis.StringCmd
		ttl *redis.DurationCmd
	}
	ctx, cancel := context.WithTimeout(ctx, readBackWait)
	defer cancel()
	p := rdb.Pipeline()
	reads := make([]read, 0, len(tokens))
	seen := make(map[string]bool, len(tokens))
	for _, token := range tokens {
		if seen[token] {
			continue
		}
		seen[token] = true
		key := t.store.prefix + token
		if r, ok := t.begin(key); ok {
			reads = append(reads, read{token, r, p.HGet(ctx, key, "id"), p.PTTL(ctx, key)})
		} else {
			skipped++
		}
	}
	if len(reads) == 0 {
		return 0, skipped
	}
	_, _ = p.Exec(ctx)
	if t.afterRead != nil {
		t.afterRead()
	}
	for i := range reads {
		r := &reads[i]
		id, pttl, err := parse(r.get, r.ttl) // an unreadable one is asked for on its request
		if life := t.store.lifeOf(pttl); err == nil && life > 0 && t.keep(r.token, &r.reading, id, life) {
			cached++
		}
	}
	return cached, skipped
}
