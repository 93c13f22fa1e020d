package redisgate

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// The claim's two commands are built by hand, not with EvalSha and Set: on
// the asynchronous pipeliner the typed methods submit at once, and the claim
// wants both commands submitted together and then one bounded wait
// (redisx.Do). Every argument that is the same from claim to claim is
// boxed once (a voucher's in claimHead, the rest here), so a claim boxes only
// its three ids: building the commands was ~3% of the service's CPU.
//
// The claim scripts' arguments (claim.lua, bucket_claim.lua): KEYS bucket,
// buyers, orders; ARGV userId, orderId, voucherId, enqueue flag, retention
// (ms).
const claimKeys = 3

// claimHead is a bucket's claim command up to its first ARGV.
func claimHead(sc *redis.Script, k redisschema.Keys) []any {
	return []any{"evalsha", sc.Hash(), claimKeys, k.Voucher, k.Buyers, k.Orders}
}

// enqueueNo and enqueueYes are ARGV[4]: whether the script XADDs the order
// message (redisschema.OrderScript).
var enqueueNo, enqueueYes any = "0", "1"

// claimCmds builds the claim of o in bucket b of l, and its index entry.
func (g *Gate) claimCmds(ctx context.Context, l *layout, b int, o domain.VoucherOrder, appendOrder bool) (run *redis.Cmd, index *redis.StatusCmd) {
	head := l.claimHeads[b]
	args := make([]any, len(head), len(head)+5)
	copy(args, head)
	enqueue := enqueueNo
	if appendOrder {
		enqueue = enqueueYes
	}
	args = append(args, int64(o.UserID()), int64(o.ID()), int64(o.VoucherID()), enqueue, g.retention)
	run = redis.NewCmd(ctx, args...)
	run.SetFirstKeyPos(3) // routes by the bucket's slot on a cluster
	index = redis.NewStatusCmd(ctx, "set", redisschema.OrderIndexKey(g.prefix, o.ID()), redisschema.EncodeOrderIndex(o, l.k), "px", g.indexTTL)
	return run, index
}

// claimKeysArgs splits a claim command back into the script's keys and
// arguments, for a retry through redisx.Set.
func claimKeysArgs(run *redis.Cmd) ([]string, []any) {
	a := run.Args()
	keys := make([]string, claimKeys)
	for i := range keys {
		keys[i], _ = a[3+i].(string)
	}
	return keys, a[3+claimKeys:]
}

// do sends one command through redisx.Do and answers its error, or the
// command's own.
func do(ctx context.Context, c redis.UniversalClient, cmd redis.Cmder) error {
	if err := redisx.Do(ctx, c, cmd); err != nil {
		return err
	}
	return cmd.Err()
}
