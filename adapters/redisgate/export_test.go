package redisgate

import (
	"context"

	"github.com/hmdp-go/seckill/domain"
)

// Readers only the tests use.

// Buckets is the voucher's K as the gate knows it (1: unsplit, or a voucher
// Redis does not hold).
func (g *Gate) Buckets(ctx context.Context, id domain.VoucherID) (int, error) {
	l, err := g.layoutOf(ctx, id)
	if err != nil {
		return 0, err
	}
	return l.k, nil
}

// Stocks is each bucket's stock (tests and the docs' measurements).
func (g *Gate) Stocks(ctx context.Context, id domain.VoucherID) ([]int64, error) {
	l, err := g.layoutOf(ctx, id)
	if err != nil {
		return nil, err
	}
	st, err := g.states(ctx, l)
	if err != nil {
		return nil, err
	}
	out := make([]int64, l.k)
	for b, s := range st {
		out[b] = s.stock
	}
	return out, nil
}

// PendingTransfers counts the voucher's transfer records.
func (g *Gate) PendingTransfers(ctx context.Context, id domain.VoucherID) (int, error) {
	l, err := g.layoutOf(ctx, id)
	if err != nil {
		return 0, err
	}
	recs, err := g.records(ctx, l)
	return len(recs), err
}
