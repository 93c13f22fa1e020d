package redisgate

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
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

// preheatSplit writes the voucher's buckets, each with its share of the
// stock, only where a bucket is absent (as Preheat, for the same reason: a
// bucket that exists may hold claims answered success). Preheat has written
// its K and named every bucket's tag in the live set before, so the stream
// consumers look for every bucket's stream before any bucket can sell.
func (g *Gate) preheatSplit(ctx context.Context, v domain.Voucher, l *layout) error {
	s := v.Sale()
	for b, bk := range l.buckets {
		code, err := g.write(ctx, s, bk, b, bk.Staging("none"), split(s.Stock(), b, l.k), 0, "preheat")
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
	h := redisschema.HomeBucket(o.UserID(), l.k)
	if done, err := g.claimHome(ctx, l, h, o, true); done {
		return err
	}
	return g.claimWithTransfers(ctx, o, l, h)
}

// claimHome claims o in its home bucket h (with index, writing the order's
// index entry too: claimIn); done is false while h is empty.
func (g *Gate) claimHome(ctx context.Context, l *layout, h int, o domain.VoucherOrder, index bool) (done bool, err error) {
	answer, err := g.claimIn(ctx, l, h, o, true, index)
	if err != nil {
		return true, fmt.Errorf("%w (outcome unknown: if the script ran, the order is fulfilled)", err)
	}
	if answer == "empty" {
		return false, nil
	}
	return true, answerErr(answer, o)
}
