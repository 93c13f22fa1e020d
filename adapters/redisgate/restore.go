package redisgate

import (
	"context"
	"fmt"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// Rebuilding a voucher's gate from the database: staged, then swapped in
// by one script.

// Restore first copies the buyers into a staging hash in chunks, then one
// script swaps it in together with the voucher hash only if the voucher hash
// is still absent. Writing the buyers straight into the live buyers hash
// would leave a half-written set behind a crash, and could mix with a
// concurrent Preheat; staging keeps the visible step atomic and O(1), however
// many buyers a sale has.
//
// A split voucher's buckets are rebuilt by restoreSplit.
func (g *Gate) Restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) (bool, error) {
	return g.restore(ctx, v, buyers, false)
}

// Overwrite replaces the voucher's gate state with the database's, whatever
// the gate holds: stock = v's remaining stock, buyers = exactly these orders.
// It is `seckill reconcile --fix`; run it only while no claims are served, or
// a claim between the database read and the swap is forgotten.
func (g *Gate) Overwrite(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) error {
	_, err := g.restore(ctx, v, buyers, true)
	return err
}

func (g *Gate) restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder, force bool) (bool, error) {
	if err := checkVoucher(v); err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	l := g.known(v.ID(), g.kOf(v))
	if l.k > 1 {
		return g.restoreSplit(ctx, v, l, buyers, force)
	}
	marks, err := domain.BuyerMarks(v.ID(), v.Sale().LimitPerUser(), buyers)
	if err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}

	k := g.keys(v.ID())
	if n, err := g.rdb.Exists(ctx, k.Voucher).Result(); err != nil {
		return false, fmt.Errorf("restore voucher %d: %w", v.ID(), err)
	} else if n == 1 && !force {
		// Cheap early answer for the common case; the script decides for real.
		return false, g.addLive(ctx, l)
	}
	// The live-set entry goes first, as in Preheat: a restored gate must
	// never accept claims that no stream consumer will look for.
	if err := g.addLive(ctx, l); err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	staging := k.Staging(randomToken())
	staged, err := g.stage(ctx, staging, marks)
	if err != nil {
		// Best effort: the TTL reclaims it otherwise.
		_ = g.rdb.Del(context.WithoutCancel(ctx), staging).Err()
		return false, fmt.Errorf("restore voucher %d: stage buyers: %w", v.ID(), err)
	}

	s := v.Sale()
	mode := "fill"
	if force {
		mode = "overwrite"
	}
	code, err := g.scripts.Run(ctx, g.rdb, writeScript, []string{k.Voucher, k.Buyers, staging},
		s.Stock(), s.Begin().UnixMilli(), s.End().UnixMilli(), g.expireAt(s).UnixMilli(), staged, mode,
		redisschema.Paused(s), addedArg(s, 0), s.LimitPerUser(),
	).Int64()
	if err != nil {
		return false, fmt.Errorf("restore voucher %d: %w", v.ID(), err)
	}
	switch code {
	case 1, 0:
		return code == 1, g.addLive(ctx, l)
	case -1:
		return false, fmt.Errorf("restore voucher %d: staged buyers expired before the swap", v.ID())
	}
	return false, fmt.Errorf("restore voucher %d: unexpected answer %d", v.ID(), code)
}

// stage writes the marks into a staging hash, one field per place
// (redisschema.PlaceField), and returns how many fields it wrote.
func (g *Gate) stage(ctx context.Context, key string, marks map[domain.UserID][]domain.OrderID) (int, error) {
	args := make([]any, 0, 2*restoreChunk)
	pipe := g.rdb.Pipeline()
	first := true
	staged := 0
	flushChunk := func() {
		pipe.HSet(ctx, key, args...)
		if first {
			pipe.PExpire(ctx, key, stagingTTL)
			first = false
		}
		args = make([]any, 0, 2*restoreChunk)
	}
	for u, places := range marks {
		for i, id := range places {
			args = append(args, redisschema.PlaceField(u, i+1), int64(id))
			staged++
			if len(args) == 2*restoreChunk {
				flushChunk()
				if pipe.Len() >= restorePipeline {
					if _, err := pipe.Exec(ctx); err != nil {
						return staged, err
					}
				}
			}
		}
	}
	if len(args) > 0 {
		flushChunk()
	}
	if pipe.Len() > 0 {
		_, err := pipe.Exec(ctx)
		return staged, err
	}
	return staged, nil
}
