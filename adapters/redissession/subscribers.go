package redissession

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The subscribers: one per Redis master, each listening to the reports of
// writes to session keys, and on a cluster the watch that follows the masters.

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
	// served), how many slots its master serves, and the warm-up reading
	// its master, if one runs.
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
	o := *t.template
	o.Addr = addr
	o.Protocol = 2 // invalidations as pub/sub messages on this very connection
	o.PoolSize = 1
	o.MinIdleConns = 0
	o.MaxRetries = -1
	prefix := t.store.prefix
	s := &subscriber{addr: addr, done: make(chan struct{})}
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
		t.listen(sctx, s, confirm)
	}()
	return nil
}

// invalidations is the channel the tracking reports come on (RESP2).
const invalidations = "__redis__:invalidate"

// removeSubscriber stops listening to a master that left the cluster (its
// slots were given to others by then). It does not wait: a listener stuck on
// a node that does not answer ends when its read times out, and Close waits
// for it.
func (t *Sessions) removeSubscriber(addr string) {
	t.mu.Lock()
	s := t.subs[addr]
	delete(t.subs, addr)
	if s != nil {
		stopWarm(s)
	}
	t.mu.Unlock()
	if s != nil {
		t.done.Add(1)
		go func() {
			defer t.done.Done()
			s.stop()
		}()
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
func (t *Sessions) listen(ctx context.Context, s *subscriber, up bool) {
	defer close(s.done)
	ps := s.ps
	pinged := false // a ping is out and nothing has come since
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, heartbeat)
		if err != nil {
			var ne interface{ Timeout() bool }
			timeout := errors.As(err, &ne) && ne.Timeout()
			if timeout && up && !pinged {
				if perr := ps.Ping(ctx); perr == nil {
					pinged = true
					continue
				}
			}
			if timeout && pinged {
				err = fmt.Errorf("no answer to a ping within %s: %w", heartbeat, err)
			}
			if up {
				up = false
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
			// Each failed read redials; do not spin on a dead node.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			// A (re)subscription: invalidations may have been missed.
			t.listening(s, &up)
		case *redis.Pong:
			if !up {
				// The connection answered after a read failed on it:
				// reports may have been missed, as after a resubscription.
				t.listening(s, &up)
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

// listening marks s up: what was cached of its master before is stale, and
// its sessions are read again once Warm has been called.
func (t *Sessions) listening(s *subscriber, up *bool) {
	if !*up && t.downs.Load() > 0 {
		t.log.Info().Str("master", s.addr).Msg("session cache: this master's sessions are served from memory again")
	}
	*up = true
	t.rewarm(t.setUp(s, true))
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
			t.unlisted() // again while the listing fails: a no-op
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
	want := make(map[string]bool, len(ms))
	var gone, added []string
	for _, m := range ms {
		want[m.addr] = true
		if t.subs[m.addr] == nil {
			added = append(added, m.addr)
		}
	}
	for a := range t.subs {
		if !want[a] {
			gone = append(gone, a)
		}
	}
	t.mu.Unlock()
	for _, a := range added {
		// Not confirmed here: a master that does not answer yet must not
		// stall the watch; its slots are not served until it listens.
		_ = t.addSubscriber(t.ctx, a, false) // cannot fail unconfirmed
	}
	t.mu.Lock()
	served := t.assign(ms)
	t.mu.Unlock()
	t.rewarm(served)
	for _, a := range gone {
		t.removeSubscriber(a)
	}
}
