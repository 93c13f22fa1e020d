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
	run, wait, err := g.runReplicated(ctx, l.buckets[b].Voucher, l.script, run)
	if err != nil {
		return "", fmt.Errorf("claim script for %s: %w", o, err)
	}
	answer, err := scriptAnswer(o, run)
	if err != nil || answer != claimOK {
		return answer, err
	}
	if err := redisx.Replicated(wait, g.opts.WaitReplicas, g.opts.WaitTimeout); err != nil {
		return "", fmt.Errorf("claim %s: %w", o, err)
	}
	return answer, nil
}

// takeReplicated is a transfer's take (step 1) on the donor's master,
// confirmed by its replicas like a claim. The claim that follows waits only
// for its home's master: on a cluster the donor is another master, and a
// failover of it to a replica that missed the take would give the donor its
// units back while the home keeps them, two places for one unit. A take not
// confirmed in time is an error (the transfer stops before its apply, and
// its record is the repair's to finish, as after a crash at that step).
func (g *Gate) takeReplicated(ctx context.Context, donor string, run *redis.Cmd) ([]int64, error) {
	run, wait, err := g.runReplicated(ctx, donor, takeScript, run)
	if err != nil {
		return nil, err
	}
	r, err := run.Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(r) > 0 && r[0] > 0 {
		if err := redisx.Replicated(wait, g.opts.WaitReplicas, g.opts.WaitTimeout); err != nil {
			return nil, fmt.Errorf("take: %w", err)
		}
	}
	return r, nil
}

// runReplicated runs a script's command and a WAIT on one connection to the
// master of key (redisx.DoReplicated), loading the script there once if the
// master lost it (a restart, or a replica just promoted that never loaded
// it). A master it cannot find was sent nothing: ports.ErrNotAdmitted.
func (g *Gate) runReplicated(ctx context.Context, key string, script *redis.Script, run *redis.Cmd) (*redis.Cmd, *redis.IntCmd, error) {
	node, err := redisx.Master(ctx, g.rdb, key)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: find the master of %s: %w", ports.ErrNotAdmitted, key, err)
	}
	wait := redisx.DoReplicated(ctx, node, g.opts.WaitReplicas, g.opts.WaitTimeout, run)
	if redisx.IsNoScript(run.Err()) {
		if err := script.Load(ctx, node).Err(); err != nil {
			return nil, nil, fmt.Errorf("load after NOSCRIPT: %w", err)
		}
		run = redis.NewCmd(ctx, run.Args()...)
		wait = redisx.DoReplicated(ctx, node, g.opts.WaitReplicas, g.opts.WaitTimeout, run)
	}
	return run, wait, nil
}
