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
	client *redis.Client
	ps     *redis.PubSub
	cancel context.CancelFunc
	done   chan struct{}
	// id is the Redis client id of its current connection.
	id atomic.Int64
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
	if confirm {
		if err := ps.Subscribe(ctx, invalidations); err != nil {
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
	go func() {
		if !confirm {
			// Dialled here, not by the caller: a master that does not
			// answer holds only its own listener back. A failed SUBSCRIBE
			// is remembered, and the listener's next read redials and
			// subscribes again.
			_ = ps.Subscribe(sctx, invalidations)
		}
		t.listen(sctx, s, up)
	}()
	return nil
}

// invalidations is the channel the tracking reports come on (RESP2).
const invalidations = "__redis__:invalidate"

// removeSubscriber stops listening to a master that left the cluster. It
// does not wait: a listener stuck on a node that does not answer ends when
// its read times out, and Close waits for it.
func (t *Tracked) removeSubscriber(addr string) {
	t.mu.Lock()
	s := t.subs[addr]
	delete(t.subs, addr)
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
		_ = t.addSubscriber(t.ctx, a, false) // cannot fail unconfirmed
	}
	for _, a := range gone {
		t.removeSubscriber(a)
	}
}
