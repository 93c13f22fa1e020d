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
	// report of it (or a flush) arrives; a marked token is not cached.
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
	// afterDown after a subscriber's failed read marked the cache down.
	afterRead, afterDown func()

	mu     sync.Mutex // guards subs
	subs   map[string]*subscriber
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// subscriber listens to one master's reports.
type subscriber struct {
	client *redis.Client
	ps     *redis.PubSub
	cancel context.CancelFunc
	done   chan struct{}
	// id is the Redis client id of its current connection.
	id atomic.Int64
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
		store:     store,
		cache:     newTTLCache(opts.Size, store.ttl),
		pending:   make(map[string]bool),
		masters:   opts.masters,
		poll:      opts.TopologyPoll,
		tick:      opts.tick,
		afterRead: opts.afterRead,
		afterDown: opts.afterDown,
		subs:      make(map[string]*subscriber),
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

// clusterMasters lists the addresses of the masters that serve slots.
func clusterMasters(ctx context.Context, c *redis.ClusterClient) ([]string, error) {
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool)
	var addrs []string
	for _, s := range slots {
		if len(s.Nodes) == 0 || seen[s.Nodes[0].Addr] {
			continue
		}
		seen[s.Nodes[0].Addr] = true
		addrs = append(addrs, s.Nodes[0].Addr)
	}
	if len(addrs) == 0 {
		return nil, errors.New("the cluster has no master serving slots")
	}
	return addrs, nil
}

// addSubscriber starts listening to one master. Its client makes every
// connection it dials (the first and any reconnection) track the session
// prefix, redirected to itself, before it subscribes. With confirm it
// returns once the subscriber listens (or fails); otherwise the subscriber
// counts as down until its listener hears the confirmation.
func (t *Tracked) addSubscriber(ctx context.Context, addr string, confirm bool) error {
	o := *t.template
	o.Addr = addr
	o.Protocol = 2 // invalidations as pub/sub messages on this very connection
	o.PoolSize = 1
	o.MinIdleConns = 0
	o.MaxRetries = -1
	prefix := t.store.prefix
	s := &subscriber{done: make(chan struct{})}
	o.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
		id, err := cn.ClientID(ctx).Result()
		if err != nil {
			return err
		}
		s.id.Store(id)
		return cn.Do(ctx, "client", "tracking", "on", "redirect", id, "bcast", "prefix", prefix).Err()
	}
	c := redis.NewClient(&o)
	ps := c.Subscribe(ctx) // connects lazily, on the first SUBSCRIBE
	t.down.Add(1)
	up := false
	fail := func(err error) error {
		_ = ps.Close()
		_ = c.Close()
		t.down.Add(-1)
		if isUnsupported(err) {
			return fmt.Errorf("%w: %v", ErrTrackingUnsupported, err)
		}
		return fmt.Errorf("subscribe to session invalidations on %s: %w", addr, err)
	}
	// A failed SUBSCRIBE is remembered: the listener's next read redials
	// and subscribes again.
	err := ps.Subscribe(ctx, "__redis__:invalidate")
	if confirm {
		if err != nil {
			return fail(err)
		}
		// The confirmation proves the connection tracks: OnConnect ran first.
		if _, err := ps.ReceiveTimeout(ctx, 5*time.Second); err != nil {
			return fail(err)
		}
		up = true
		t.down.Add(-1)
	}
	sctx, cancel := context.WithCancel(t.ctx)
	s.client, s.ps, s.cancel = c, ps, cancel
	t.mu.Lock()
	t.subs[addr] = s
	t.mu.Unlock()
	go t.listen(sctx, s, up)
	return nil
}

// removeSubscriber stops listening to a master that left the cluster.
func (t *Tracked) removeSubscriber(addr string) {
	t.mu.Lock()
	s := t.subs[addr]
	delete(t.subs, addr)
	t.mu.Unlock()
	if s != nil {
		s.stop()
	}
}

func (s *subscriber) stop() {
	s.cancel()
	_ = s.ps.Close() // unblocks the listener's read
	<-s.done
	_ = s.client.Close()
}

func isUnsupported(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "unknown") || strings.Contains(s, "not supported") || strings.Contains(s, "tracking")
}

// heartbeat is how long a subscriber waits for a message before it pings,
// so a dead connection is noticed (and the cache stops serving) within
// about twice this.
const heartbeat = time.Second

// listen applies one subscriber's invalidations until it is stopped. A
// failed read marks the subscriber down (the cache stops serving and
// empties); the next read reconnects, and the subscription confirmation
// marks it up.
func (t *Tracked) listen(ctx context.Context, s *subscriber, up bool) {
	defer close(s.done)
	markDown := func() {
		if up {
			up = false
			t.down.Add(1)
			t.flush()
		}
	}
	defer func() {
		if !up { // a subscriber that is gone holds nothing back
			t.down.Add(-1)
		}
	}()
	ps := s.ps
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
			if t.afterDown != nil {
				t.afterDown()
			}
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

// watch lists the cluster's masters on every tick and follows them.
func (t *Tracked) watch() {
	defer t.done.Done()
	tick := t.tick
	if tick == nil {
		tk := time.NewTicker(t.poll)
		defer tk.Stop()
		tick = tk.C
	}
	known := true
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick:
		}
		ctx, cancel := context.WithTimeout(t.ctx, max(t.poll, time.Second))
		addrs, err := t.masters(ctx)
		cancel()
		if err != nil {
			if t.ctx.Err() != nil {
				return
			}
			if known {
				known = false
				t.down.Add(1)
				t.flush()
			}
			t.polls.Add(1)
			continue
		}
		t.follow(addrs)
		if !known {
			// New masters' subscribers, added above, hold the cache back
			// until they listen.
			known = true
			t.down.Add(-1)
		}
		t.polls.Add(1)
	}
}

// follow adds a subscriber for each new master and drops those of masters
// that left.
func (t *Tracked) follow(addrs []string) {
	want := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		want[a] = true
	}
	t.mu.Lock()
	var gone, added []string
	for a := range t.subs {
		if !want[a] {
			gone = append(gone, a)
		}
	}
	for a := range want {
		if t.subs[a] == nil {
			added = append(added, a)
		}
	}
	t.mu.Unlock()
	for _, a := range added {
		// Not confirmed here: a master that does not answer yet must not
		// stall the watch; its subscriber counts as down until it listens.
		_ = t.addSubscriber(t.ctx, a, false)
	}
	for _, a := range gone {
		t.removeSubscriber(a)
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

// invalidate evicts a session key's token and queues it to be read back.
// The epoch moves and a prefetch in flight is marked first, so neither a
// lookup nor a prefetch of that key caches what it read before the write.
func (t *Tracked) invalidate(key string) {
	t.epoch(key).Add(1)
	token := strings.TrimPrefix(key, t.store.prefix)
	if t.npending.Load() > 0 {
		t.pmu.Lock()
		if _, ok := t.pending[token]; ok {
			t.pending[token] = true
		}
		t.pmu.Unlock()
	}
	t.cache.Remove(token)
	t.reports.Add(1)
	if t.queue != nil && token != "" && len(token) <= maxTokenLen {
		select {
		case t.queue <- token:
		default:
			t.skipped.Add(1) // looked up on its first request instead
		}
	}
}

func (t *Tracked) flush() {
	for i := range t.epochs {
		t.epochs[i].Add(1)
	}
	t.pmu.Lock()
	for token := range t.pending {
		t.pending[token] = true
	}
	t.pmu.Unlock()
	t.cache.Purge()
}

// prefetchLoop reads reported tokens back, in batches of what has queued
// up meanwhile.
func (t *Tracked) prefetchLoop() {
	defer t.done.Done()
	batch := make([]string, 0, prefetchBatch)
	for {
		batch = batch[:0]
		select {
		case <-t.ctx.Done():
			return
		case token := <-t.queue:
			batch = append(batch, token)
		}
	more:
		for len(batch) < prefetchBatch {
			select {
			case token := <-t.queue:
				batch = append(batch, token)
			default:
				break more
			}
		}
		t.prefetch(batch)
	}
}

// prefetch reads tokens' sessions (HGET and PTTL, no refresh: this is not a
// request of theirs) in one pipeline and caches those that exist, for as
// long as they live, unless a report of the token arrived meanwhile.
func (t *Tracked) prefetch(tokens []string) {
	if t.down.Load() != 0 {
		t.skipped.Add(int64(len(tokens)))
		return
	}
	t.pmu.Lock()
	for _, token := range tokens {
		t.pending[token] = false
	}
	t.npending.Store(int64(len(t.pending)))
	t.pmu.Unlock()

	gets := make([]*redis.StringCmd, len(tokens))
	ttls := make([]*redis.DurationCmd, len(tokens))
	ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
	_, _ = t.store.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, token := range tokens {
			key := t.store.prefix + token
			gets[i] = p.HGet(ctx, key, "id")
			ttls[i] = p.PTTL(ctx, key)
		}
		return nil
	})
	cancel()
	if t.afterRead != nil {
		t.afterRead()
	}

	t.pmu.Lock()
	defer t.pmu.Unlock()
	serving := t.down.Load() == 0
	for i, token := range tokens {
		dirty, ok := t.pending[token]
		if !ok {
			continue // a duplicate in this batch, already handled
		}
		delete(t.pending, token)
		if dirty || !serving {
			continue
		}
		id, err := parseUser(gets[i])
		if err != nil {
			continue // gone, malformed, or unreadable: its request asks Redis
		}
		pttl, err := ttls[i].Result()
		if err != nil {
			continue
		}
		if life := t.store.lifeOf(pttl); life > 0 {
			t.cache.AddFor(token, id, life)
			t.prefetched.Add(1)
		}
	}
	t.npending.Store(int64(len(t.pending)))
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
	// Add, then check: an invalidation after the check finds the entry and
	// evicts it; one before it moved the epoch, and the entry goes again.
	if serving && life > 0 {
		t.cache.AddFor(token, id, life)
		if epoch.Load() != seen || t.down.Load() != 0 {
			t.cache.Remove(token)
		}
	}
	return id, nil
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
