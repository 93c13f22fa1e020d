package redisgate

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// layout is what the gate knows of a voucher's keys: its K (1 when unsplit), each
// bucket's keys and claim command up to its first ARGV, and the claim script.
type layout struct {
	id         domain.VoucherID
	k          int
	buckets    []redisschema.Keys
	script     *redis.Script
	claimHeads [][]any
}

func (g *Gate) newLayout(id domain.VoucherID, k int) *layout {
	l := &layout{id: id, k: k, buckets: make([]redisschema.Keys, k), claimHeads: make([][]any, k), script: claimScript}
	if k > 1 {
		l.script = bucketClaimScript
	}
	for b := range k {
		bk := g.bucket(id, b, k)
		l.buckets[b] = bk
		l.claimHeads[b] = []any{"evalsha", l.script.Hash(), claimKeys, bk.Voucher, bk.Buyers, bk.Orders}
	}
	return l
}

// byHome groups orders by their user's home bucket, keeping their order.
func (l *layout) byHome(orders []domain.VoucherOrder) [][]domain.VoucherOrder {
	homes := make([][]domain.VoucherOrder, l.k)
	for _, o := range orders {
		h := redisschema.HomeBucket(o.UserID(), l.k)
		homes[h] = append(homes[h], o)
	}
	return homes
}

// kOf is the number of buckets v is sold in.
func (g *Gate) kOf(v domain.Voucher) int {
	if g.opts.Unsplit {
		return 1
	}
	return v.Sale().Buckets()
}

// known records v's layout, which the caller read from the database.
func (g *Gate) known(id domain.VoucherID, k int) *layout {
	if l, ok := g.layouts.Load(id); ok && l.(*layout).k == k {
		return l.(*layout)
	}
	l := g.newLayout(id, k)
	g.layouts.Store(id, l)
	return l
}

// layoutOf is the voucher's layout: from memory once known, else its K from
// Redis (BucketMeta; absent: unsplit). A K of 1 is forgotten when a claim finds
// no gate (forget): the voucher may be preheated split later, or its K key was lost.
func (g *Gate) layoutOf(ctx context.Context, id domain.VoucherID) (*layout, error) {
	if l := g.last.Load(); l != nil && l.id == id {
		return l, nil
	}
	if l, ok := g.layouts.Load(id); ok {
		g.last.Store(l.(*layout))
		return l.(*layout), nil
	}
	k := 1
	if !g.opts.Unsplit { // through the claim path's client: within the claim's budget
		get := redis.NewStringCmd(ctx, "get", redisschema.BucketMeta(g.prefix, id))
		if err := do(ctx, g.claims, get); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("buckets of voucher %d: %w", id, err)
		}
		k = kIn(get)
	}
	l := g.known(id, k)
	g.last.Store(l)
	return l, nil
}

// forget drops an unsplit layout that met no gate.
func (g *Gate) forget(l *layout) {
	if l.k == 1 {
		g.layouts.CompareAndDelete(l.id, l)
		g.last.CompareAndSwap(l, nil)
	}
}

// kinds reads every voucher's K from Redis in one pipelined round trip, ignoring
// the cache, so the probe reports a voucher whose K key was lost alone.
func (g *Gate) kinds(ctx context.Context, ids []domain.VoucherID) ([]*layout, error) {
	cmds := make([]*redis.StringCmd, len(ids))
	if !g.opts.Unsplit {
		pipe := g.rdb.Pipeline()
		for i, id := range ids {
			cmds[i] = pipe.Get(ctx, redisschema.BucketMeta(g.prefix, id))
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("probe %d vouchers' buckets: %w", len(ids), err)
		}
	}
	out := make([]*layout, len(ids))
	for i, id := range ids {
		out[i] = g.newLayout(id, kIn(cmds[i]))
	}
	return out, nil
}

// kIn is the K a GET of BucketMeta read: 1 when none (or no GET).
func kIn(get *redis.StringCmd) int {
	if get != nil {
		if k, err := get.Int(); err == nil && k > 1 {
			return k
		}
	}
	return 1
}

// The claim scripts take KEYS bucket, buyers, orders; ARGV userId, orderId,
// voucherId, enqueue flag, retention (ms).
const claimKeys = 3

var enqueueNo, enqueueYes any = "0", "1" // ARGV[4], boxed once

// claimCmds builds the claim of o in bucket b of l, and its index entry, by hand:
// the claim submits both then waits once, and boxes only its three ids.
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

// do sends one command through redisx.Do and answers its error or the command's.
func do(ctx context.Context, c redis.UniversalClient, cmd redis.Cmder) error {
	if err := redisx.Do(ctx, c, cmd); err != nil {
		return err
	}
	return cmd.Err()
}
