package redisgate

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// layout is what the gate knows of a voucher's keys: its K and each bucket's
// key names. An unsplit voucher is K = 1, whose one bucket is the voucher's
// own keys ({<id>}:voucher ...), as they always were.
type layout struct {
	id      domain.VoucherID
	k       int
	buckets []redisschema.Keys
	// script decides a claim: claim.lua for an unsplit voucher,
	// bucket_claim.lua for a split one's buckets. claimHeads are each
	// bucket's claim command up to its first ARGV (claimargs.go), boxed once.
	script     *redis.Script
	claimHeads [][]any
}

func (g *Gate) newLayout(id domain.VoucherID, k int) *layout {
	l := &layout{id: id, k: k, buckets: make([]redisschema.Keys, k), claimHeads: make([][]any, k), script: claimScript}
	if k > 1 {
		l.script = bucketClaimScript
	}
	for b := range k {
		l.buckets[b] = g.bucket(id, b, k)
		l.claimHeads[b] = claimHead(l.script, l.buckets[b])
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

// kOf is the number of buckets v is sold in: its K from the database, or 1
// on a gate that sells every voucher whole.
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
// Redis (the {<id>}:buckets key; absent: unsplit), one GET per voucher and
// process. A split voucher's K never changes, so it is kept for good; a K of
// 1 read from Redis is forgotten when a claim finds no gate (forget): the
// voucher may be preheated split a moment later, or its K key may have been
// lost alone until the repair writes it again.
func (g *Gate) layoutOf(ctx context.Context, id domain.VoucherID) (*layout, error) {
	if l := g.last.Load(); l != nil && l.id == id {
		return l, nil
	}
	if l, ok := g.layouts.Load(id); ok {
		g.last.Store(l.(*layout))
		return l.(*layout), nil
	}
	k := 1
	if !g.opts.Unsplit {
		// Through the claim path's client, with its bounded wait: a claim's
		// first lookup must end with the claim's budget.
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

// kinds reads every voucher's K from Redis in one pipelined round trip,
// whatever this process has cached: the probe must see a K key that was lost
// alone. A split voucher whose K key was lost reads as unsplit: the probe
// then finds no unsplit gate and reports it, and its Restore (K from the
// database) writes the key again.
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

// kIn is the K a GET of a voucher's K key read: 1 when there is none (or no
// GET).
func kIn(get *redis.StringCmd) int {
	if get == nil {
		return 1
	}
	if k, err := get.Int(); err == nil && k > 1 {
		return k
	}
	return 1
}
