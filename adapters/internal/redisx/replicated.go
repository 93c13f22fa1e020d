package redisx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

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
