package redissession

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Which master serves which slot, and whether the cache may serve a slot's
// tokens. A failure stays where it happened: while one master's subscriber
// is down, only the tokens whose slot that master serves are looked up in
// Redis; the other masters' are still answered from memory.

// slotCount is the number of Redis Cluster hash slots; a single Redis
// serves them all.
const slotCount = 16384

// slotDown marks a slot state whose tokens are not served from memory: its
// master's subscriber is not listening, no known master serves it, or the
// masters could not be listed.
const slotDown = 1

// slotStates holds, per slot, gen<<1 | slotDown. Every change of a slot's
// owner or of whether it is served moves gen, and gen never comes back, so
// an entry (which keeps the state its read began under) is served only while
// nothing happened to its slot since: the entries of a master whose
// subscriber went down, or whose slots another master took, are never served
// again, and a read that began before is never cached. Written under
// Sessions.mu only; read without a lock.
type slotStates [slotCount]atomic.Uint64

// move gives slot i a new state (the writer holds Sessions.mu).
func (s *slotStates) move(i int, down bool) {
	next := (s[i].Load()>>1 + 1) << 1
	if down {
		next |= slotDown
	}
	s[i].Store(next)
}

// slotRange is an inclusive range of slots one master serves.
type slotRange struct{ lo, hi uint16 }

// master is one master and the slots it serves.
type master struct {
	addr  string
	slots []slotRange
}

// allSlots is what a single Redis serves.
var allSlots = []slotRange{{0, slotCount - 1}}

// clusterMasters lists the masters that serve slots, with their ranges.
func clusterMasters(ctx context.Context, c *redis.ClusterClient) ([]master, error) {
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	at := make(map[string]int)
	var ms []master
	for _, s := range slots {
		if len(s.Nodes) == 0 || s.Start < 0 || s.End >= slotCount || s.Start > s.End {
			continue
		}
		addr := s.Nodes[0].Addr
		i, ok := at[addr]
		if !ok {
			i = len(ms)
			at[addr] = i
			ms = append(ms, master{addr: addr})
		}
		ms[i].slots = append(ms[i].slots, slotRange{uint16(s.Start), uint16(s.End)})
	}
	if len(ms) == 0 {
		return nil, errors.New("the cluster has no master serving slots")
	}
	return ms, nil
}

// assign makes the listed masters the owners of their slots (a slot no
// listed master serves has none) and moves the state of every slot whose
// owner changed. It returns the subscribers some of whose slots are served
// again. The caller holds t.mu; each listed master has a subscriber.
func (t *Sessions) assign(ms []master) []*subscriber {
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
			for i := int(r.lo); i <= int(r.hi); i++ {
				owners[i] = s
			}
			s.owns += int(r.hi) - int(r.lo) + 1
		}
	}
	return t.restate(&owners, nil)
}

// restate gives each slot its owner in owners and moves the state of those
// whose owner changed or which became served or not, and of every slot of
// force (a subscriber that may have missed reports although it is up). It
// returns the subscribers some of whose slots became served. The caller
// holds t.mu.
func (t *Sessions) restate(owners *[slotCount]*subscriber, force *subscriber) []*subscriber {
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
		t.states.move(i, down)
		if !down && !slices.Contains(served, o) {
			served = append(served, o)
		}
	}
	return served
}

// setUp records whether s listens and moves the states of its slots. A
// subscriber that (re)subscribes may have missed reports even if it was
// counted up: its slots move either way. It returns the subscribers whose
// slots became served (s, or none).
func (t *Sessions) setUp(s *subscriber, up bool) []*subscriber {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.up = up
	var force *subscriber
	if up {
		force = s
	} else {
		stopWarm(s)
	}
	return t.restate(&t.owner, force)
}

// unlisted records that the masters could not be listed: until they are
// (follow), no slot has an owner, so none is served.
func (t *Sessions) unlisted() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.subs {
		stopWarm(s)
	}
	t.restate(&[slotCount]*subscriber{}, nil)
}
