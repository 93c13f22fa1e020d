package redisgate

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisbatch"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/adapters/redisscript"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// A voucher split into K > 1 buckets (docs/SCALING-buckets.md): its K key,
// its buckets' preheat, and a claim decided in the user's home bucket.

var (
	//go:embed take.lua
	takeLua    string
	takeScript = redis.NewScript(takeLua)
	//go:embed apply.lua
	applyLua    string
	applyScript = redis.NewScript(applyLua)
	//go:embed write.lua
	writeLua    string
	writeScript = redis.NewScript(writeLua)
	//go:embed freeze.lua
	freezeLua    string
	freezeScript = redis.NewScript(freezeLua)
)

func (g *Gate) bucket(id domain.VoucherID, b, k int) redisschema.Keys {
	return redisschema.KeysForTag(g.prefix, redisschema.BucketTag(id, b, k))
}

// split is bucket b's share of n units: as even as integers allow.
func split(n, b, k int) int {
	s := n / k
	if b < n%k {
		s++
	}
	return s
}

func (g *Gate) setMeta(ctx context.Context, v domain.Voucher, k int) error {
	key := redisschema.BucketMeta(g.prefix, v.ID())
	ok, err := g.rdb.SetNX(ctx, key, k, 0).Result()
	if err != nil {
		return err
	}
	if !ok {
		cur, err := g.rdb.Get(ctx, key).Int()
		if err != nil {
			return err
		}
		if cur != k {
			return fmt.Errorf("voucher %d is split into %d buckets in Redis, not %d", v.ID(), cur, k)
		}
	}
	if err := g.rdb.PExpireAt(ctx, key, g.expireAt(v.Sale())).Err(); err != nil {
		return err
	}
	g.known(v.ID(), k)
	return nil
}

// preheatSplit writes the voucher's K and its buckets, each with its share of
// the stock, only where a bucket is absent (as Preheat, for the same reason:
// a bucket that exists may hold claims answered success). The live set names
// every bucket's tag before any bucket can sell, so the stream consumers look
// for every bucket's stream.
func (g *Gate) preheatSplit(ctx context.Context, v domain.Voucher, l *layout) error {
	k := l.k
	if err := g.setMeta(ctx, v, k); err != nil {
		return fmt.Errorf("preheat voucher %d: %w", v.ID(), err)
	}
	if err := g.addLive(ctx, l); err != nil {
		return fmt.Errorf("preheat: %w", err)
	}
	s := v.Sale()
	for b := range k {
		bk := l.buckets[b]
		code, err := g.scripts.Run(ctx, g.rdb, writeScript, []string{bk.Voucher, bk.Buyers, bk.Staging("none")},
			split(s.Stock(), b, k), s.Begin().UnixMilli(), s.End().UnixMilli(), g.expireAt(s).UnixMilli(), 0, "preheat",
			redisschema.Paused(s), addedArg(s, b)).Int()
		if err != nil {
			return fmt.Errorf("preheat voucher %d bucket %d: %w", v.ID(), b, err)
		}
		if code == -2 {
			return anotherSale(v.ID())
		}
	}
	return nil
}

// claimSplit is a split voucher's claim (the Stream driver's): the home
// bucket's script reserves and appends the order; when the home is empty it
// moves units from the other buckets and tries again (transfer.go).
func (g *Gate) claimSplit(ctx context.Context, l *layout, o domain.VoucherOrder) error {
	k := l.k
	h := redisschema.HomeBucket(o.UserID(), k)
	home := l.buckets[h]
	answer, err := g.claimOnce(ctx, home, k, o, true)
	if err != nil {
		return fmt.Errorf("%w (outcome unknown: if the script ran, the order is fulfilled)", err)
	}
	if answer != "empty" {
		return answerErr(answer, o)
	}
	return g.claimWithTransfers(ctx, o, l, h)
}

// answerErr maps the claim script's answer to Admit's result.
func answerErr(answer string, o domain.VoucherOrder) error {
	switch answer {
	case claimOK:
		return nil
	case "busy":
		return fmt.Errorf("%w: voucher %d's buckets are being restored", ports.ErrNotAdmitted, o.VoucherID())
	case "empty":
		return domain.ErrSoldOut
	}
	if r, ok := domain.RefusalByCode(answer); ok {
		return r
	}
	return fmt.Errorf("bucket claim script for %s: unexpected answer %q", o, answer)
}

// claimOnce runs the claim script on one bucket; with index it also writes
// the order's index entry in the same round trip (as redisgate does, and in
// the same format, so status queries find queued orders of either kind).
func (g *Gate) claimOnce(ctx context.Context, bk redisschema.Keys, k int, o domain.VoucherOrder, index bool) (string, error) {
	keys := []string{bk.Voucher, bk.Buyers, bk.Orders}
	args := []any{int64(o.UserID()), int64(o.ID()), g.retention.Milliseconds(), int64(o.VoucherID())}
	if g.waitReplicas > 0 {
		return g.claimReplicatedSplit(ctx, bk, k, o, index, keys, args)
	}
	pipe := g.rdb.Pipeline()
	run := pipe.EvalSha(ctx, bucketClaimScript.Hash(), keys, args...)
	if index {
		pipe.Set(ctx, redisschema.OrderIndexKey(g.prefix, o.ID()), redisschema.EncodeOrderIndex(o, k), max(g.retention, minIndexTTL))
	}
	_, _ = pipe.Exec(ctx)
	if redisscript.IsNoScript(run.Err()) {
		run = g.scripts.Retry(ctx, g.rdb, bucketClaimScript, keys, args...)
	}
	answer, err := run.Text()
	if err != nil {
		if redisbatch.NoReplicas(err) {
			// Refused at its first write: nothing was taken.
			return "", fmt.Errorf("bucket claim script for %s: %w: %w", o, ports.ErrNotAdmitted, err)
		}
		return "", fmt.Errorf("bucket claim script for %s: %w", o, err)
	}
	return answer, nil
}

// claimReplicatedSplit is claimOnce with a WAIT on the claim's own connection to
// the bucket's master: an 'ok' not confirmed by enough replicas in time is an
// error (the outcome is unknown: the master took it). Refusals and 'empty'
// write nothing, so they need no confirmation.
func (g *Gate) claimReplicatedSplit(ctx context.Context, bk redisschema.Keys, k int, o domain.VoucherOrder, index bool, keys []string, args []any) (string, error) {
	if index {
		_ = g.rdb.Set(ctx, redisschema.OrderIndexKey(g.prefix, o.ID()), redisschema.EncodeOrderIndex(o, k), max(g.retention, minIndexTTL)).Err()
	}
	node, err := redisbatch.Master(ctx, g.rdb, bk.Voucher)
	if err != nil {
		return "", fmt.Errorf("bucket claim for %s: %w: find the bucket's master: %w", o, ports.ErrNotAdmitted, err)
	}
	run := redis.NewCmd(ctx, append([]any{"evalsha", bucketClaimScript.Hash(), len(keys), keys[0], keys[1], keys[2]}, args...)...)
	wait := redisbatch.DoReplicated(ctx, node, g.waitReplicas, g.waitTimeout, run)
	if redisscript.IsNoScript(run.Err()) {
		if err := bucketClaimScript.Load(ctx, node).Err(); err != nil {
			return "", fmt.Errorf("bucket claim script for %s: load after NOSCRIPT: %w", o, err)
		}
		run = redis.NewCmd(ctx, append([]any{"evalsha", bucketClaimScript.Hash(), len(keys), keys[0], keys[1], keys[2]}, args...)...)
		wait = redisbatch.DoReplicated(ctx, node, g.waitReplicas, g.waitTimeout, run)
	}
	answer, err := run.Text()
	if err != nil {
		if redisbatch.NoReplicas(err) {
			// Refused at its first write: nothing was taken.
			return "", fmt.Errorf("bucket claim script for %s: %w: %w", o, ports.ErrNotAdmitted, err)
		}
		return "", fmt.Errorf("bucket claim script for %s: %w", o, err)
	}
	if answer == "ok" {
		if err := redisbatch.Replicated(wait, g.waitReplicas, g.waitTimeout); err != nil {
			return "", fmt.Errorf("bucket claim %s: %w", o, err)
		}
	}
	return answer, nil
}
