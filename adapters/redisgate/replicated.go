package redisgate

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// ErrNotReplicated: a claim ran on its master but fewer replicas than asked
// confirmed it in time; a failover now could lose it.
var ErrNotReplicated = redisx.ErrNotReplicated

// claimReplicated runs the claim script and a WAIT on one connection to the
// bucket's master (redisx.DoReplicated), so a claim pays a pooled
// connection of its own for the round trip; the index entry still rides the
// pipeliner. An 'ok' not confirmed by enough replicas in time is an error
// (the outcome is unknown: the master took it); refusals write nothing, so
// they need no confirmation.
func (g *Gate) claimReplicated(ctx context.Context, o domain.VoucherOrder, l *layout, b int, run *redis.Cmd, entry redis.Cmder, index bool) (string, error) {
	if index {
		redisx.Send(ctx, g.claims, entry)
	}
	node, err := redisx.Master(ctx, g.rdb, l.buckets[b].Voucher)
	if err != nil {
		// Nothing was sent: the claim changed nothing.
		return "", fmt.Errorf("claim script for %s: %w: find the bucket's master: %w", o, ports.ErrNotAdmitted, err)
	}
	wait := redisx.DoReplicated(ctx, node, g.waitReplicas, g.waitTimeout, run)
	if redisx.IsNoScript(run.Err()) {
		// The master lost its script cache (a restart, or a replica just
		// promoted that never loaded it): load it there and run again.
		if err := l.script.Load(ctx, node).Err(); err != nil {
			return "", fmt.Errorf("claim script for %s: load after NOSCRIPT: %w", o, err)
		}
		run = redis.NewCmd(ctx, run.Args()...)
		wait = redisx.DoReplicated(ctx, node, g.waitReplicas, g.waitTimeout, run)
	}
	answer, err := scriptAnswer(o, run)
	if err != nil || answer != claimOK {
		return answer, err
	}
	if err := redisx.Replicated(wait, g.waitReplicas, g.waitTimeout); err != nil {
		return "", fmt.Errorf("claim %s: %w", o, err)
	}
	return answer, nil
}
