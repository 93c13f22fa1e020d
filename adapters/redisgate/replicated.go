package redisgate

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisbatch"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// claimReplicated runs the claim script and a WAIT on one connection to the
// voucher's master, so the WAIT covers exactly this claim's writes: WAIT
// waits for the replication offset of its own connection's last write, and
// on any other connection it would confirm nothing. The claim path's
// pipeliner cannot carry the pair (go-redis diverts WAIT, a blocking command,
// off the shared batches), so a claim pays a pooled connection of its own for
// the round trip; the index entry still rides the pipeliner.
func (g *Gate) claimReplicated(ctx context.Context, o domain.VoucherOrder, key string, run *redis.Cmd, index redis.Cmder, keys []string, args []any) error {
	redisbatch.Send(ctx, g.claims, index)
	node, err := g.master(ctx, key)
	if err != nil {
		// Nothing was sent: the claim changed nothing.
		return fmt.Errorf("claim script for %s: %w: find the voucher's master: %w", o, ports.ErrNotAdmitted, err)
	}
	wait := g.runWithWait(ctx, node, run)
	if err := run.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The master lost its script cache (a restart, or a replica just
		// promoted that never loaded it): load it there and run again.
		if err := claimScript.Load(ctx, node).Err(); err != nil {
			return fmt.Errorf("claim script for %s: load after NOSCRIPT: %w", o, err)
		}
		run = redis.NewCmd(ctx, append([]any{"evalsha", claimScript.Hash(), len(keys), keys[0], keys[1], keys[2]}, args...)...)
		wait = g.runWithWait(ctx, node, run)
	}
	if err := g.answer(o, run); err != nil {
		return err
	}
	n, err := wait.Result()
	if err != nil {
		return fmt.Errorf("claim %s: WAIT %d replicas: %w", o, g.waitReplicas, err)
	}
	if n < int64(g.waitReplicas) {
		return fmt.Errorf("claim %s: %w (%d of %d within %s)", o, ErrNotReplicated, n, g.waitReplicas, g.waitTimeout)
	}
	return nil
}

func (g *Gate) runWithWait(ctx context.Context, node *redis.Client, run *redis.Cmd) *redis.IntCmd {
	pipe := node.Pipeline()
	_ = pipe.Process(ctx, run)
	wait := redis.NewIntCmd(ctx, "wait", g.waitReplicas, g.waitTimeout.Milliseconds())
	_ = pipe.Process(ctx, wait)
	_, _ = pipe.Exec(ctx)
	return wait
}

// master is the client of the node that holds key's slot: the cluster's
// master for it, or the one node.
func (g *Gate) master(ctx context.Context, key string) (*redis.Client, error) {
	switch c := g.rdb.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("WAIT needs a go-redis Client or ClusterClient, got %T", g.rdb)
}
