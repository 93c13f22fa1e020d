package redissession

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

type subscriber struct {
	addr   string
	client *redis.Client
	ps     *redis.PubSub
	cancel context.CancelFunc
	done   chan struct{}
	id     atomic.Int64 // the Redis client id of its current connection
	// Under Sessions.mu (its listener, the one writer, reads up without it).
	up         bool
	owns       int
	warmCancel context.CancelFunc
}

const invalidations = "__redis__:invalidate"

// addSubscriber starts listening to one master: each connection tracks the prefix,
// redirected to itself, before it subscribes. With confirm it returns once the
// subscriber listens (or fails); otherwise it is down until the confirmation.
func (t *Sessions) addSubscriber(ctx context.Context, addr string, confirm bool) error {
	o := t.nodeOptions(addr)
	o.Protocol = 2 // invalidations as pub/sub messages on this very connection
	o.MaxRetries = -1
	s := &subscriber{addr: addr, done: make(chan struct{})}
	o.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
		id, err := cn.ClientID(ctx).Result()
		if err != nil {
			return err
		}
		s.id.Store(id)
		return cn.Do(ctx, "client", "tracking", "on", "redirect", id, "bcast", "prefix", t.store.prefix).Err()
	}
	c := redis.NewClient(o)
	ps := c.Subscribe(ctx) // connects on the first SUBSCRIBE
	if confirm {
		err := ps.Subscribe(ctx, invalidations)
		if err == nil {
			// The confirmation proves the connection tracks: OnConnect ran first.
			_, err = ps.ReceiveTimeout(ctx, 5*time.Second)
		}
		if err != nil {
			_ = ps.Close()
			_ = c.Close()
			if isUnsupported(err) {
				return fmt.Errorf("%w: %v", errTrackingUnsupported, err)
			}
			return fmt.Errorf("subscribe to session invalidations on %s: %w", addr, err)
		}
	}
	sctx, cancel := context.WithCancel(t.ctx)
	s.client, s.ps, s.cancel = c, ps, cancel
	t.mu.Lock()
	s.up = confirm
	t.subs[addr] = s
	t.mu.Unlock()
	go func() {
		if !confirm {
			// Dialled here so a silent master holds back only its own listener; the next read retries.
			_ = ps.Subscribe(sctx, invalidations)
		}
		t.listen(sctx, s)
	}()
	return nil
}

func (t *Sessions) nodeOptions(addr string) *redis.Options {
	o := *t.template
	o.Addr, o.PoolSize, o.MinIdleConns = addr, 1, 0
	return &o
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
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

// heartbeat is how long a subscriber waits for a message before it pings, and
// then for the PONG: a silent connection stops its master's slots within about twice this.
const heartbeat = time.Second

// listen applies one subscriber's invalidations until it is stopped. A failed read
// marks it down; the next read reconnects, and the confirmation marks it up.
func (t *Sessions) listen(ctx context.Context, s *subscriber) {
	defer close(s.done)
	ps := s.ps
	pinged := false // a ping is out and nothing has come since
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, heartbeat)
		if err != nil {
			var ne interface{ Timeout() bool }
			timeout := errors.As(err, &ne) && ne.Timeout()
			if timeout && s.up && !pinged && ps.Ping(ctx) == nil {
				pinged = true
				continue
			}
			if timeout && pinged {
				err = fmt.Errorf("no answer to a ping within %s: %w", heartbeat, err)
			}
			if s.up {
				t.setUp(s, false)
				t.downs.Add(1)
				if ctx.Err() == nil {
					t.log.Warn().Err(err).Str("master", s.addr).
						Msg("session cache: this master's sessions are read from Redis on every request until its invalidation reports are heard again")
				}
			}
			if t.afterDown != nil {
				t.afterDown()
			}
			if !timeout && ctx.Err() == nil && ps.Ping(ctx) == nil {
				// The connection works yet a read failed: RESP2's FLUSHDB/FLUSHALL report has a
				// null payload go-redis cannot parse. No resubscription follows; the PONG brings it up.
				continue
			}
			sleep(ctx, 100*time.Millisecond) // each failed read redials; do not spin on a dead node
			continue
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription: // a (re)subscription: reports may have been missed
			t.listening(s)
		case *redis.Pong:
			if !s.up { // answered after a read failed on it
				t.listening(s)
			}
		case *redis.Message:
			if len(m.PayloadSlice) == 0 && m.Payload == "" {
				t.setUp(s, true) // FLUSHDB / FLUSHALL: every key of this master is gone
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

// listening marks s up: what was cached of its master before is stale.
func (t *Sessions) listening(s *subscriber) {
	if !s.up && t.downs.Load() > 0 {
		t.log.Info().Str("master", s.addr).Msg("session cache: this master's sessions are served from memory again")
	}
	t.setUp(s, true)
}

func (t *Sessions) watch() {
	defer t.done.Done()
	tick := t.tick
	if tick == nil {
		tk := time.NewTicker(topologyPoll)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick:
		}
		ctx, cancel := context.WithTimeout(t.ctx, topologyPoll)
		ms, err := t.masters(ctx)
		cancel()
		switch {
		case err == nil:
			t.follow(ms)
		case t.ctx.Err() != nil:
			return
		default: // no slot has an owner, so none is served, until the masters are listed
			t.mu.Lock()
			for _, s := range t.subs {
				stopWarm(s)
			}
			t.restate(&[slotCount]*subscriber{}, nil)
			t.mu.Unlock()
		}
		t.polls.Add(1)
	}
}

// follow adds a subscriber per new master, gives each its slots, and drops those of masters that left.
func (t *Sessions) follow(ms []master) {
	t.mu.Lock()
	var added []string
	for _, m := range ms {
		if t.subs[m.addr] == nil {
			added = append(added, m.addr)
		}
	}
	t.mu.Unlock()
	for _, a := range added {
		// Unconfirmed (it cannot fail so): a master that does not answer must not stall the watch.
		_ = t.addSubscriber(t.ctx, a, false)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.assign(ms)
	for a, s := range t.subs {
		if slices.ContainsFunc(ms, func(m master) bool { return m.addr == a }) {
			continue
		}
		// Not awaited: a listener stuck on a silent node ends when its read times out; Close waits.
		delete(t.subs, a)
		stopWarm(s)
		t.done.Add(1)
		go func() {
			defer t.done.Done()
			s.stop()
		}()
	}
}

const (
	slotCount = 16384 // Redis Cluster hash slots; a single Redis serves them all
	// slotDown marks a slot state whose tokens are not served from memory.
	slotDown = 1
)

// master is one master's address and the inclusive ranges of slots it serves.
type master struct {
	addr  string
	slots [][2]uint16
}

// clusterMasters reads CLUSTER SLOTS, deprecated for CLUSTER SHARDS, on
// purpose: it is what go-redis routes commands by, so a listener's master is
// the one the client sends that slot's tokens to, named the same way.
func clusterMasters(ctx context.Context, c *redis.ClusterClient) ([]master, error) {
	slots, err := c.ClusterSlots(ctx).Result() //nolint:staticcheck // see above
	if err != nil {
		return nil, err
	}
	var ms []master
	for _, s := range slots {
		if len(s.Nodes) == 0 || s.Start < 0 || s.End >= slotCount || s.Start > s.End {
			continue
		}
		addr := s.Nodes[0].Addr
		i := slices.IndexFunc(ms, func(m master) bool { return m.addr == addr })
		if i < 0 {
			i = len(ms)
			ms = append(ms, master{addr: addr})
		}
		ms[i].slots = append(ms[i].slots, [2]uint16{uint16(s.Start), uint16(s.End)})
	}
	if len(ms) == 0 {
		return nil, errors.New("the cluster has no master serving slots")
	}
	return ms, nil
}

// assign makes the listed masters the owners of their slots and restates them. Under t.mu.
func (t *Sessions) assign(ms []master) {
	var owners [slotCount]*subscriber
	for _, s := range t.subs {
		s.owns = 0
	}
	for _, m := range ms {
		s := t.subs[m.addr]
		if s == nil {
			continue
		}
		for _, r := range m.slots {
			for i := int(r[0]); i <= int(r[1]); i++ {
				owners[i] = s
			}
			s.owns += int(r[1]) - int(r[0]) + 1
		}
	}
	t.restate(&owners, nil)
}

// restate gives each slot its owner and moves the state of those whose owner or
// servedness changed, and of every slot of force (up but may have missed reports).
// Once Warm ran, masters some of whose slots became served are read again. Under t.mu.
func (t *Sessions) restate(owners *[slotCount]*subscriber, force *subscriber) {
	var served []*subscriber
	for i, o := range owners {
		down := o == nil || !o.up
		if o == t.owner[i] && (force == nil || o != force) && down == (t.states[i].Load()&slotDown != 0) {
			continue
		}
		t.owner[i] = o
		next := (t.states[i].Load()>>1 + 1) << 1 // a new generation
		if down {
			next |= slotDown
		}
		t.states[i].Store(next)
		if !down && !slices.Contains(served, o) {
			served = append(served, o)
		}
	}
	if t.warm.on && !t.closed {
		for _, s := range served {
			t.startWarm(s, func() {})
		}
	}
}

// setUp records whether s listens and restates its slots; a (re)subscribed one
// may have missed reports, so its slots move even if it was up.
func (t *Sessions) setUp(s *subscriber, up bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.up = up
	var force *subscriber
	if up {
		force = s
	} else {
		stopWarm(s)
	}
	t.restate(&t.owner, force)
}

const (
	// DefaultWarmDuty is the fraction of the time a master's warm-up keeps a request
	// in flight: it slows down with a busy Redis instead of competing with a stampede.
	DefaultWarmDuty = 0.1
	warmScanCount   = 256 // SCAN's COUNT; what one round finds is read in one pipeline
	warmRetry       = 100 * time.Millisecond
	warmRetryMax    = 3 * time.Second
)

type warmUp struct {
	on                  bool          // under Sessions.mu: Warm was called
	ended               chan struct{} // closed when every first warm-up has ended
	cached, read, scans atomic.Int64
}

type WarmProgress struct {
	Cached, Read, Scans int64 // sessions cached and read, SCANs sent
	Done                bool  // each first warm-up has ended (read all, filled its share, or stopped)
}

// Warm starts reading in the background the sessions of every listening master,
// each up to its share of the cache (by its slots), at DefaultWarmDuty's pace; from
// then on a master that comes back or takes slots is read again. Close stops it.
func (t *Sessions) Warm() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.warm.on || t.closed {
		return
	}
	t.warm.on = true
	var first sync.WaitGroup
	for _, s := range t.subs {
		if s.up {
			first.Add(1)
			t.startWarm(s, first.Done)
		}
	}
	t.done.Add(1)
	go func() {
		defer t.done.Done()
		first.Wait()
		close(t.warm.ended)
	}()
}

func (t *Sessions) WarmProgress() WarmProgress {
	p := WarmProgress{Cached: t.warm.cached.Load(), Read: t.warm.read.Load(), Scans: t.warm.scans.Load()}
	select {
	case <-t.warm.ended:
		p.Done = true
	default:
	}
	return p
}

// WarmedUp is closed once WarmProgress is Done.
func (t *Sessions) WarmedUp() <-chan struct{} { return t.warm.ended }

// startWarm (re)starts reading s's master and calls ended when it ends. Under t.mu.
func (t *Sessions) startWarm(s *subscriber, ended func()) {
	stopWarm(s)
	share := t.size * s.owns / slotCount
	if share <= 0 {
		ended()
		return
	}
	ctx, cancel := context.WithCancel(t.ctx)
	s.warmCancel = cancel
	t.done.Add(1)
	go func() {
		defer t.done.Done()
		defer ended()
		defer cancel()
		t.warmMaster(ctx, s.addr, share)
	}()
}

func stopWarm(s *subscriber) {
	if s.warmCancel != nil {
		s.warmCancel()
		s.warmCancel = nil
	}
}

// warmMaster reads the master's sessions until it cached share of them, SCAN is
// done, or ctx ends. Its own connection keeps reads on that master (a moved key
// answers MOVED and is not cached) and spares the service's pools.
func (t *Sessions) warmMaster(ctx context.Context, addr string, share int) {
	c := redis.NewClient(t.nodeOptions(addr))
	defer func() { _ = c.Close() }()
	prefix := t.store.prefix
	match := globQuoter.Replace(prefix) + "*"
	var cursor uint64
	cached, failed := 0, 0
	for ctx.Err() == nil {
		began := time.Now()
		keys, next, err := c.Scan(ctx, cursor, match, warmScanCount).Result()
		if err == nil && t.scanFault != nil {
			err = t.scanFault()
		}
		t.warm.scans.Add(1)
		if err != nil {
			// The connection may be up (else the subscriber stops the warm-up): retry the page, backing off.
			failed++
			if failed == 1 {
				t.log.Warn().Err(err).Str("master", addr).Int("cached", cached).
					Msg("session warm-up: reading sessions failed; retrying")
			}
			sleep(ctx, min(warmRetry<<min(failed-1, 5), warmRetryMax))
			continue
		}
		if failed > 0 {
			t.log.Info().Str("master", addr).Int("failures", failed).Msg("session warm-up: reading sessions again")
			failed = 0
		}
		tokens := make([]string, 0, len(keys))
		for _, k := range keys {
			if tok := strings.TrimPrefix(k, prefix); usable(tok) {
				tokens = append(tokens, tok)
			}
		}
		if room := share - cached; len(tokens) > room {
			tokens = tokens[:room]
		}
		n, _ := t.readBack(ctx, c, tokens)
		cached += n
		t.warm.cached.Add(int64(n))
		t.warm.read.Add(int64(len(tokens)))
		if next == 0 || cached >= share {
			return
		}
		cursor = next
		sleep(ctx, time.Duration(float64(time.Since(began))*(1/t.warmDuty-1)))
	}
}

var globQuoter = strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`, `\`, `\\`)
