package redisx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Do and Send send the claim path's Redis commands the cheapest way the
// client allows: through go-redis's automatic pipeliner when it is one
// (the commands of every concurrent claim share one write and one read), in
// one ordinary pipeline otherwise. Either way the caller's context bounds the
// wait: a claim never waits on Redis past its budget.
//
// Do runs cmds and returns once each has an answer or ctx ends, whichever is
// first; each command's own error is on the command. It returns ctx.Err()
// when ctx ended first: the commands may still run afterwards (they are on
// the wire), so a caller that cares undoes or reports an unknown outcome.
//
// On an asynchronous AutoPipeliner the commands are submitted together, so
// they usually travel in the same batch (one round trip for all of them,
// shared with other callers' commands); on any other client they go as one
// pipeline, or as a single command when there is one.
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

// Send queues cmds without waiting for their answers when c is an
// asynchronous AutoPipeliner (they travel with the next batch, usually the
// caller's next command's, and are not dropped when ctx ends), and runs them
// like Do, bounded by ctx, otherwise. For writes whose outcome the caller
// does not need, such as pushing a session's expiry back: on the pipelined
// path they cost the request no round trip of its own.
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

// DoReplicated sends cmds and then WAIT replicas timeout on one connection to
// node, and returns the WAIT: WAIT waits for the replication offset of its
// own connection's last write, so on any other connection it would confirm
// nothing. (The automatic pipeliner cannot carry it: go-redis diverts WAIT, a
// blocking command, off the shared batches.) Each command's own error is on
// the command.
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

// NoReplicas: the master refused a write for want of replicas (Redis's
// min-replicas-to-write). A claim script meets it at its first write, so the
// claim changed nothing: it may be answered busy, never outcome unknown.
func NoReplicas(err error) bool { return redis.HasErrorPrefix(err, "NOREPLICAS") }
