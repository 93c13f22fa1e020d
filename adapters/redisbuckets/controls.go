package redisbuckets

import (
	"context"
	"fmt"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// The sale controls on a split voucher: every bucket decides its own
// claims, so each bucket's hash gets the change.

var _ ports.GateControls = (*Router)(nil)

// SetEnd goes to the buckets of a split voucher (K from v, read from MySQL),
// to the unsplit gate otherwise.
func (r *Router) SetEnd(ctx context.Context, v domain.Voucher) error {
	if k := v.Sale().Buckets(); k > 1 && r.streams {
		return r.split.SetEnd(ctx, v, k)
	}
	return r.whole.SetEnd(ctx, v)
}

// SetEnd writes the end into each of the K bucket hashes, one script per
// bucket (each its own slot), and keeps the K key as long as the buckets.
// A bucket written before a failure keeps the new end; the control's retry
// writes them all again.
func (g *Gate) SetEnd(ctx context.Context, v domain.Voucher, k int) error {
	if err := checkVoucher(v, k); err != nil {
		return fmt.Errorf("set end: %w", err)
	}
	s := v.Sale()
	end, expire := s.End().UnixMilli(), g.expireAt(s).UnixMilli()
	for b := range k {
		bk := g.bucket(v.ID(), b, k)
		if err := g.scripts.Run(ctx, g.rdb, redisschema.SetEndScript, []string{bk.Voucher, bk.Buyers}, end, expire).Err(); err != nil {
			return fmt.Errorf("set end of voucher %d bucket %d: %w", v.ID(), b, err)
		}
	}
	meta := redisschema.BucketMeta(g.prefix, v.ID())
	if err := g.rdb.PExpireAt(ctx, meta, g.expireAt(s)).Err(); err != nil {
		return fmt.Errorf("set end of voucher %d: keep its K: %w", v.ID(), err)
	}
	return nil
}
