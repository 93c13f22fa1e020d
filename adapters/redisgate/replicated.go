package redisgate

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisbatch"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// ErrNotReplicated: a claim ran on its master but fewer replicas than asked
// confirmed it in time; a failover now could lose it.
var ErrNotReplicated = redisbatch.ErrNotReplicated

// claimReplicated runs the claim script and a WAIT on one connection to the
// voucher's master (redisbatch.DoReplicated), so a claim pays a pooled
// connection of its own for the round trip; the index entry still rides the
// pipeliner.
func (g *Gate) claimReplicated(ctx context.Context, o domain.VoucherOrder, key string, run *redis.Cmd, index redis.Cmder) error {
	redisbatch.Send(ctx, g.claims, index)
	node, err := redisbatch.Master(ctx, g.rdb, key)
	if err != nil {
		// Nothing was sent: the claim changed nothing.
		return fmt.Errorf("claim script for %s: %w: find the voucher's master: %w", o, ports.ErrNotAdmitted, err)
	}
	wait := redisbatch.DoReplicated(ctx, node, g.waitReplicas, g.waitTimeout, run)
	if err := run.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The master lost its script cache (a restart, or a replica just
		// promoted that never loaded it): load it there and run again.
		if err := claimScript.Load(ctx, node).Err(); err != nil {
			return fmt.Errorf("claim script for %s: load after NOSCRIPT: %w", o, err)
		}
		run = redis.NewCmd(ctx, run.Args()...)
		wait = redisbatch.DoReplicated(ctx, node, g.waitReplicas, g.waitTimeout, run)
	}
	if err := g.answer(o, run); err != nil {
		return err
	}
	if err := redisbatch.Replicated(wait, g.waitReplicas, g.waitTimeout); err != nil {
		return fmt.Errorf("claim %s: %w", o, err)
	}
	return nil
}
