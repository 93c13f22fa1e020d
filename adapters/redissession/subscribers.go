package redissession

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscriber listens to one master's reports.
type subscriber struct {
	addr   string
	client *redis.Client
	ps     *redis.PubSub
	cancel context.CancelFunc
	done   chan struct{}
	// id is the Redis client id of its current connection.
	id atomic.Int64
	// Under Sessions.mu: whether it listens (its master's slots are
	// served; its listener, the one writer, reads it without the lock),
	// how many slots its master serves, and the warm-up reading its
	// master, if one runs.
	up         bool
	owns       int
	warmCancel context.CancelFunc
}

// addSubscriber starts listening to one master. Its client makes every
// connection it dials (the first and any reconnection) track the session
// prefix, redirected to itself, before it subscribes. With confirm it
// returns once the subscriber listens (or fails); otherwise the subscriber
// counts as down until its listener hears the confirmation. Its master's
// slots are given to it by assign.
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
	ps := c.Subscribe(ctx) // connects lazily, on the first SUBSCRIBE
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
			// Dialled here, not by the caller: a master that does not
			// answer holds only its own listener back. A failed SUBSCRIBE
			// is remembered, and the listener's next read redials and
			// subscribes again.
			_ = ps.Subscribe(sctx, invalidations)
		}
		t.listen(sctx, s)
	}()
	return nil
}

// invalidations is the channel the tracking reports come on (RESP2).
const invalidations = "__redis__:invalidate"

// nodeOptions are those of a client of its own, of one connection, to the
// master at addr.
func (t *Sessions) nodeOptions(addr string) *redis.Options {
	o := *t.template
	o.Addr, o.PoolSize, o.MinIdleConns = addr, 1, 0
	return &o
}

// sleep waits d, or less if ctx ends.
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

// heartbeat is how long a subscriber waits for a message before it pings,
// and then for the ping's answer: a dead connection is noticed (and its
// master's slots stop being served) within about twice this, a silent one
// too (its peer gone without a reset: a host lost, a NAT entry dropped),
// where the ping's write succeeds and only its answer never comes.
const heartbeat = time.Second

// listen applies one subscriber's invalidations until it is stopped. A
// failed read marks the subscriber down (its master's slots are not served,
// and what was cached of them is stale from then on); the next read
// reconnects, and the subscription confirmation marks it up, and has its
// master's sessions read again once Warm has been called.
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
				// A read can fail on a connection that works: Redis's
				// flush-everything report (FLUSHDB or FLUSHALL of any
				// database of the server) has a null payload in RESP2,
				// which go-redis cannot parse. The connection is not
				// broken, so no resubscription would ever bring the
				// subscriber up again; its PONG does (case *redis.Pong),
				// and what was cached of this master is stale from the
				// failure on, as after a flush. A broken connection fails
				// the ping, or is redialled by it and resubscribed.
				continue
			}
			sleep(ctx, 100*time.Millisecond) // each failed read redials; do not spin on a dead node
			continue
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			// A (re)subscription: invalidations may have been missed.
			t.listening(s)
		case *redis.Pong:
			if !s.up {
				// The connection answered after a read failed on it:
				// reports may have been missed, as after a resubscription.
				t.listening(s)
			}
		case *redis.Message:
			if len(m.PayloadSlice) == 0 && m.Payload == "" {
				// FLUSHDB / FLUSHALL: every key of this master is gone.
				t.setUp(s, true)
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

// watch lists the cluster's masters on every tick and follows them.
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
		default:
			// Until the masters are listed again (follow), no slot has an
			// owner, so none is served (again while the listing fails: a
			// no-op).
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

// follow adds a subscriber for each new master, gives each master its
// slots, and drops the subscribers of masters that left. A slot that moved
// is not served until its new master's subscriber listens, and what was
// cached of it before is stale.
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
		// Not confirmed here: a master that does not answer yet must not
		// stall the watch; its slots are not served until it listens.
		_ = t.addSubscriber(t.ctx, a, false) // cannot fail unconfirmed
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.assign(ms)
	for a, s := range t.subs {
		if slices.ContainsFunc(ms, func(m master) bool { return m.addr == a }) {
			continue
		}
		// Its master left (its slots were given to others above). Not
		// awaited: a listener stuck on a node that does not answer ends
		// when its read times out, and Close waits for it.
		delete(t.subs, a)
		stopWarm(s)
		t.done.Add(1)
		go func() {
			defer t.done.Done()
			s.stop()
		}()
	}
}

// slotCount is the number of Redis Cluster hash slots; a single Redis
// serves them all.
const slotCount = 16384

// slotDown marks a slot state whose tokens are not served from memory: its
// master's subscriber is not listening, no known master serves it, or the
// masters could not be listed.
const slotDown = 1

// master is one master and the inclusive ranges of slots it serves.
type master struct {
	addr  string
	slots [][2]uint16
}

// clusterMasters lists the masters that serve slots, with their ranges.
func clusterMasters(ctx context.Context, c *redis.ClusterClient) ([]master, error) {
	slots, err := c.ClusterSlots(ctx).Result()
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

// assign makes the listed masters the owners of their slots (a slot no
// listed master serves has none) and restates the slots. The caller holds
// t.mu.
func (t *Sessions) assign(ms []master) {
	var owners [slotCount]*subscriber
	for _, s := range t.subs {
		s.owns = 0
	}
	for _, m := range ms {
		s := t.subs[m.addr]
		if s == nil {
			continue // its slots have no owner: not served
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

// restate gives each slot its owner in owners and moves the state of those
// whose owner changed or which became served or not, and of every slot of
// force (a subscriber that may have missed reports although it is up). Once
// Warm has been called, the masters some of whose slots became served are
// read again (what was cached of them is stale). The caller holds t.mu.
func (t *Sessions) restate(owners *[slotCount]*subscriber, force *subscriber) {
	var served []*subscriber
	for i := range owners {
		o := owners[i]
		down := o == nil || !o.up
		wasDown := t.states[i].Load()&slotDown != 0
		forced := force != nil && o == force
		if o == t.owner[i] && !forced && down == wasDown {
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

// setUp records whether s listens and restates its slots. A subscriber that
// (re)subscribes may have missed reports even if it was counted up: its
// slots move either way.
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
