package redissession

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
)

// Master is a master's address and the slot ranges (inclusive) it serves,
// as a listing of the topology tells them.
type Master struct {
	Addr  string
	Slots [][2]int
}

// WithTopology makes a Sessions list its masters with masters, on each
// value sent on tick instead of a timer.
func WithTopology(o CacheOptions, masters func(context.Context) ([]Master, error), tick <-chan time.Time) CacheOptions {
	o.masters = func(ctx context.Context) ([]master, error) {
		ms, err := masters(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]master, len(ms))
		for i, m := range ms {
			out[i].addr = m.Addr
			for _, r := range m.Slots {
				out[i].slots = append(out[i].slots, [2]uint16{uint16(r[0]), uint16(r[1])})
			}
		}
		return out, nil
	}
	o.tick = tick
	return o
}

// WithScanFault makes each warm-up SCAN fail, once sent, with what fault
// returns (its reply lost).
func WithScanFault(o CacheOptions, fault func() error) CacheOptions {
	o.scanFault = fault
	return o
}

// WithWarmDuty sets the fraction of the time a warm-up keeps Redis busy.
func WithWarmDuty(o CacheOptions, duty float64) CacheOptions {
	o.warmDuty = duty
	return o
}

// SlotOf is the Redis Cluster slot of key, as the cache computes it.
func SlotOf(key string) int { return int(redisschema.Slot(key)) }

// probe gives tests the guard's words and tags; nothing reports to it.
var probe guard

// SharesGuardWord tells whether keys a and b share their word of the guard
// with tags of their own: a report of one is a report of another key to a
// read of the other.
func SharesGuardWord(a, b string) bool {
	wa, ta := probe.word(a)
	wb, tb := probe.word(b)
	return wa == wb && ta != tb
}

// SubscriberID is the Redis client id of the connection of the subscriber
// listening to the master at addr (0: none).
func (t *Sessions) SubscriberID(addr string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.subs[addr]; s != nil {
		return s.id.Load()
	}
	return 0
}

// WithAfterRead runs f between each read-back's read (a prefetch's or the
// warm-up's) and its caching.
func WithAfterRead(o CacheOptions, f func()) CacheOptions {
	o.afterRead = f
	return o
}

// WithAfterLookup runs f in a request's miss after its read ("read") and
// after it cached the answer or refused to ("add").
func WithAfterLookup(o CacheOptions, f func(stage string)) CacheOptions {
	o.afterLookup = f
	return o
}

// WithAfterDown runs f in a subscriber's listener each time a failed read
// has stopped its master's slots from being served, before it redials.
func WithAfterDown(o CacheOptions, f func()) CacheOptions {
	o.afterDown = f
	return o
}

// SubscriberIDs are the Redis client ids of the subscribers' connections.
func (t *Sessions) SubscriberIDs() []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []int64
	for _, s := range t.subs {
		ids = append(ids, s.id.Load())
	}
	return ids
}

// Polls tells how many times the masters were listed since the start.
func (t *Sessions) Polls() int64 { return t.polls.Load() }

// ClusterMasters lists the masters serving slots and their ranges, as the
// watch does.
func ClusterMasters(ctx context.Context, c *redis.ClusterClient) ([]Master, error) {
	ms, err := clusterMasters(ctx, c)
	out := make([]Master, len(ms))
	for i, m := range ms {
		out[i].Addr = m.addr
		for _, r := range m.slots {
			out[i].Slots = append(out[i].Slots, [2]int{int(r[0]), int(r[1])})
		}
	}
	return out, err
}
