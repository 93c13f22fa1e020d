package redisgate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// returnChunk bounds one return script, which holds Redis while it runs (a
// chunk of 500 costs about as much as one claim pipeline's worth of work).
const returnChunk = 500

// Return runs return.lua once per bucket and chunk of its orders (an
// unsplit voucher is one bucket): an expiry pass of one sale's 500 orders is
// one round trip, not 500. Each order's unit goes back to its buyer's home
// bucket, which held its mark. The returned set it writes costs one member
// per cancelled order, for as long as the sale's keys live (its end +
// retention).
func (g *Gate) Return(ctx context.Context, orders []domain.VoucherOrder) error {
	for _, group := range byVoucher(orders) {
		l, err := g.layoutOf(ctx, group[0].VoucherID())
		if err != nil {
			return fmt.Errorf("return %d orders: %w", len(group), err)
		}
		for b, home := range l.byHome(group) {
			if _, err := g.returnTo(ctx, l.buckets[b], home, false); err != nil {
				return fmt.Errorf("return units of voucher %d bucket %d: %w", l.id, b, err)
			}
		}
	}
	return nil
}

// errFrozen: a bucket a restore has frozen gives nothing back until the
// restore is done (return.lua, release.lua); the caller tries again.
var errFrozen = errors.New("the bucket is being restored: nothing given back, try again")

// returnTo returns orders whose home is bucket k and answers the units it
// gave back; restoring is the restore's own call, into a bucket it froze.
func (g *Gate) returnTo(ctx context.Context, k redisschema.Keys, orders []domain.VoucherOrder, restoring bool) (int64, error) {
	var given int64
	for chunk := range slices.Chunk(orders, returnChunk) {
		args := make([]any, 0, 2+2*len(chunk))
		args = append(args, boolArg(g.opts.ReclaimAfterCancel), boolArg(restoring))
		for _, o := range chunk {
			args = append(args, int64(o.UserID()), int64(o.ID()))
		}
		n, err := g.scripts.Run(ctx, g.rdb, returnScript, []string{k.Voucher, k.Buyers, k.Returned()}, args...).Int64()
		if err != nil {
			return given, err
		}
		if n < 0 {
			return given, errFrozen
		}
		given += n
	}
	return given, nil
}

// byVoucher groups orders by voucher, keeping their order within each
// group and the groups in order of first appearance.
func byVoucher(orders []domain.VoucherOrder) [][]domain.VoucherOrder {
	idx := map[domain.VoucherID]int{}
	var out [][]domain.VoucherOrder
	for _, o := range orders {
		i, ok := idx[o.VoucherID()]
		if !ok {
			i = len(out)
			idx[o.VoucherID()] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], o)
	}
	return out
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
