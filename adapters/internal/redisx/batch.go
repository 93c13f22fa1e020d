package redisx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Do runs the claim path's commands the cheapest way the client allows:
// submitted together on an asynchronous AutoPipeliner (so they usually share
// one batch with every concurrent claim's), as one pipeline (or one command)
// otherwise. It returns once each has an answer (each command's error is on
// it) or ctx ends: then ctx.Err(), and the commands, on the wire, may still
// run, so a caller that cares undoes or reports an unknown outcome.
func Do(ctx context.Context, c redis.UniversalClient, cmds ...redis.Cmder) error {
	if ap, ok := c.(*redis.AutoPipeliner); ok && !ap.IsBlocking() {
		var futures [4]redis.AutoFuture
		fs := futures[:0]
		for _, cmd := range cmds {
			fs = append(fs, ap.Submit(ctx, cmd))
		}
		for _, f := range fs {
			if err := f.WaitContext(ctx); err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
		}
		return nil
	}
	if len(cmds) == 1 {
		_ = c.Process(ctx, cmds[0])
		return ctx.Err()
	}
	pipe := c.Pipeline()
	for _, cmd := range cmds {
		_ = pipe.Process(ctx, cmd)
	}
	_, _ = pipe.Exec(ctx)
	return ctx.Err()
}

// Send is for writes whose outcome the caller does not need: on an
// asynchronous AutoPipeliner it queues cmds unawaited (they ride with the next
// batch and survive ctx's end), costing no round trip; otherwise it is Do.
func Send(ctx context.Context, c redis.UniversalClient, cmds ...redis.Cmder) {
	if ap, ok := c.(*redis.AutoPipeliner); ok && !ap.IsBlocking() {
		bg := context.WithoutCancel(ctx)
		for _, cmd := range cmds {
			ap.Submit(bg, cmd)
		}
		return
	}
	_ = Do(ctx, c, cmds...)
}

// ErrNotReplicated: the commands ran on their master but fewer replicas than
// asked confirmed them in time; a failover now could lose them.
var ErrNotReplicated = errors.New("not confirmed by enough replicas")

// Master is the client of the node that holds key's slot: the cluster's
// master for it, or the one node.
func Master(ctx context.Context, rdb redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("WAIT needs a go-redis Client or ClusterClient, got %T", rdb)
}

// DoReplicated sends cmds and then WAIT on one connection to node, and returns
// the WAIT: it confirms its own connection's writes only (and the automatic
// pipeliner diverts it, a blocking command, off the shared batches).
func DoReplicated(ctx context.Context, node *redis.Client, replicas int, timeout time.Duration, cmds ...redis.Cmder) *redis.IntCmd {
	pipe := node.Pipeline()
	for _, c := range cmds {
		_ = pipe.Process(ctx, c)
	}
	wait := redis.NewIntCmd(ctx, "wait", replicas, timeout.Milliseconds())
	_ = pipe.Process(ctx, wait)
	_, _ = pipe.Exec(ctx)
	return wait
}

// Replicated checks a WAIT's answer against the replicas asked for.
func Replicated(wait *redis.IntCmd, replicas int, timeout time.Duration) error {
	n, err := wait.Result()
	if err != nil {
		return fmt.Errorf("WAIT %d replicas: %w", replicas, err)
	}
	if n < int64(replicas) {
		return fmt.Errorf("%w (%d of %d within %s)", ErrNotReplicated, n, replicas, timeout)
	}
	return nil
}

// NoReplicas: the master refused a write for want of replicas
// (min-replicas-to-write). A claim script meets it at its first write, so the
// claim changed nothing: busy, not outcome unknown.
func NoReplicas(err error) bool { return redis.HasErrorPrefix(err, "NOREPLICAS") }
