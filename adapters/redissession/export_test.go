package redissession

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// WithTopology makes a Tracked list its masters with masters, on each
// value sent on tick instead of a timer.
func WithTopology(o TrackedOptions, masters func(context.Context) ([]string, error), tick <-chan time.Time) TrackedOptions {
	o.masters, o.tick = masters, tick
	return o
}

// WithAfterRead runs f between each prefetch's read and its caching.
func WithAfterRead(o TrackedOptions, f func()) TrackedOptions {
	o.afterRead = f
	return o
}

// WithAfterLookup runs f in a request's miss after its read ("read") and
// after it cached the answer ("add").
func WithAfterLookup(o TrackedOptions, f func(stage string)) TrackedOptions {
	o.afterLookup = f
	return o
}

// WithAfterDown runs f in a subscriber's listener each time a failed read
// has marked the cache down, before it redials.
func WithAfterDown(o TrackedOptions, f func()) TrackedOptions {
	o.afterDown = f
	return o
}

// SubscriberIDs are the Redis client ids of the subscribers' connections.
func (t *Tracked) SubscriberIDs() []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []int64
	for _, s := range t.subs {
		ids = append(ids, s.id.Load())
	}
	return ids
}

// Polls tells how many times the masters were listed since the start.
func (t *Tracked) Polls() int64 { return t.polls.Load() }

// ClusterMasters lists the masters serving slots, as the watch does.
func ClusterMasters(ctx context.Context, c *redis.ClusterClient) ([]string, error) {
	return clusterMasters(ctx, c)
}
