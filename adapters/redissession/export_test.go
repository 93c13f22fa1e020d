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

// Polls tells how many times the masters were listed since the start.
func (t *Tracked) Polls() int64 { return t.polls.Load() }

// ClusterMasters lists the masters serving slots, as the watch does.
func ClusterMasters(ctx context.Context, c *redis.ClusterClient) ([]string, error) {
	return clusterMasters(ctx, c)
}
