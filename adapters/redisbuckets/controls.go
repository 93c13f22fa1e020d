package redisbuckets

import (
	"context"
	"fmt"
	"strconv"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// The sale controls on a split voucher: every bucket decides its own
// claims, so each bucket's hash gets the change.

var _ ports.GateControls = (*Router)(nil)

// Apply goes to the buckets of a split voucher (K from v, read from MySQL),
// to the unsplit gate otherwise.
func (r *Router) Apply(ctx context.Context, v domain.Voucher) error {
	if k := v.Sale().Buckets(); k > 1 && r.streams {
		return r.split.Apply(ctx, v, k)
	}
	return r.whole.Apply(ctx, v)
}

// Apply writes the end and the pause into each of the K bucket hashes, one
// script per bucket (each its own slot), and keeps the K key as long as the
// buckets. Added units all go to bucket 0, which alone keeps the total
// taken ('added'): the sum of the buckets grows by what was added, and
// claims whose home is empty take them from there by transfers, as any
// other unit. A bucket written before a failure keeps the change; the
// retry (or the repair) writes them all again, and adds nothing twice.
func (g *Gate) Apply(ctx context.Context, v domain.Voucher, k int) error {
	if err := checkVoucher(v, k); err != nil {
		return fmt.Errorf("apply controls: %w", err)
	}
	s := v.Sale()
	end, expire, paused := s.End().UnixMilli(), g.expireAt(s).UnixMilli(), redisschema.Paused(s)
	for b := range k {
		bk := g.bucket(v.ID(), b, k)
		added := ""
		if b == 0 {
			added = strconv.Itoa(s.Added())
		}
		err := g.scripts.Run(ctx, g.rdb, redisschema.ControlsScript, []string{bk.Voucher, bk.Buyers}, end, expire, paused, added).Err()
		if err != nil {
			return fmt.Errorf("apply controls to voucher %d bucket %d: %w", v.ID(), b, err)
		}
	}
	meta := redisschema.BucketMeta(g.prefix, v.ID())
	if err := g.rdb.PExpireAt(ctx, meta, g.expireAt(s)).Err(); err != nil {
		return fmt.Errorf("apply controls to voucher %d: keep its K: %w", v.ID(), err)
	}
	return nil
}
