package redisx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Do runs the claim path's commands on an asynchronous AutoPipeliner (sharing
// concurrent claims' batches), else as one pipeline or command. It returns once
// each has an answer (its error on it) or with ctx.Err(): then they may still run.
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

// Send is for writes whose outcome nobody needs: on an asynchronous AutoPipeliner
// it queues cmds unawaited (surviving ctx's end); otherwise it is Do.
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

// ErrNotReplicated: the commands ran on their master but too few replicas confirmed them in time.
var ErrNotReplicated = errors.New("not confirmed by enough replicas")

// Master is the client of the node that holds key's slot: the cluster's master for it, or the one node.
func Master(ctx context.Context, rdb redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("WAIT needs a go-redis Client or ClusterClient, got %T", rdb)
}

// DoReplicated sends cmds and then WAIT in one pipeline to node (WAIT confirms
// its own connection's writes only), and returns the WAIT.
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

// NoReplicas: the master refused a write for want of replicas (min-replicas-to-write);
// a script meets it at its first write, so nothing changed.
func NoReplicas(err error) bool { return redis.HasErrorPrefix(err, "NOREPLICAS") }
