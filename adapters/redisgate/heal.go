package redisgate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// healChunk bounds one HMGET and one heal script, which holds Redis while it
// runs: many forgotten buyers are healed in atomic steps of this many.
const healChunk = 500

// Counts costs two pipelined round trips: every voucher's K, then each
// bucket's buyers, stock and (split) transfer records' units, which count as
// stock: one applied but not yet deleted counts twice for a moment, which can
// only start a heal that finds nothing to put back.
func (g *Gate) Counts(ctx context.Context, ids []domain.VoucherID) (map[domain.VoucherID]ports.GateCount, error) {
	out := make(map[domain.VoucherID]ports.GateCount, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	ls, err := g.kinds(ctx, ids)
	if err != nil {
		return nil, err
	}
	type bucketCmds struct {
		buyers *redis.IntCmd
		stock  *redis.StringCmd
		xfer   *redis.StringSliceCmd
	}
	pipe := g.rdb.Pipeline()
	cmds := make([][]bucketCmds, len(ls))
	for i, l := range ls {
		for _, bk := range l.buckets {
			c := bucketCmds{buyers: pipe.HLen(ctx, bk.Buyers), stock: pipe.HGet(ctx, bk.Voucher, "stock")}
			if l.k > 1 {
				c.xfer = pipe.HVals(ctx, bk.Transfers())
			}
			cmds[i] = append(cmds[i], c)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("count %d vouchers' buyers: %w", len(ids), err)
	}
	for i, l := range ls {
		var count ports.GateCount
		found := false
		for _, c := range cmds[i] {
			s, err := c.stock.Int()
			if errors.Is(err, redis.Nil) {
				continue // no bucket: Missing reports it
			}
			if err != nil {
				return nil, fmt.Errorf("stock of voucher %d: %w", l.id, err)
			}
			found = true
			count.Buyers += int(c.buyers.Val())
			count.Stock += s
			if c.xfer != nil {
				for _, raw := range c.xfer.Val() {
					if r, ok := parseRecord("", raw); ok {
						count.Stock += int(r.n)
					}
				}
			}
		}
		if found {
			out[l.id] = count
		}
	}
	return out, nil
}

// Heal finds the orders their home bucket's places lack (pipelined HMGETs: a
// false alarm writes nothing), then puts them back with heal.lua, which checks
// each place again (a claim that took it meanwhile keeps it). A split home
// short of units first pulls them from the others, so a unit counts as
// oversold only when no bucket has one left.
func (g *Gate) Heal(ctx context.Context, v domain.Voucher, orders []domain.VoucherOrder) (ports.Healed, error) {
	var h ports.Healed
	if err := v.CheckGateable(); err != nil {
		return h, fmt.Errorf("heal: %w", err)
	}
	limit := v.Sale().LimitPerUser()
	if _, err := domain.BuyerMarks(v, orders); err != nil {
		return h, fmt.Errorf("heal: %w", err)
	}
	l := g.known(v.ID(), g.kOf(v))
	for b, home := range l.byHome(orders) {
		got, err := g.healBucket(ctx, l, b, home, limit)
		h = h.Add(got)
		if err != nil {
			return h, fmt.Errorf("heal voucher %d bucket %d: %w", v.ID(), b, err)
		}
	}
	return h, nil
}

func (g *Gate) healBucket(ctx context.Context, l *layout, b int, orders []domain.VoucherOrder, limit int) (ports.Healed, error) {
	var h ports.Healed
	k := l.buckets[b]
	lacking, err := g.lacking(ctx, k.Buyers, orders, limit)
	if err != nil || len(lacking) == 0 {
		return h, err
	}
	if l.k > 1 {
		if err := g.pull(ctx, l, b, int64(len(lacking))); err != nil {
			return h, err
		}
	}
	for chunk := range slices.Chunk(lacking, healChunk) {
		args := make([]any, 0, 2+2*len(chunk))
		args = append(args, g.opts.Retention.Milliseconds(), limit)
		for _, o := range chunk {
			args = append(args, int64(o.UserID()), int64(o.Mark()))
		}
		res, err := g.scripts.Run(ctx, g.rdb, healScript, []string{k.Voucher, k.Buyers, k.Returned()}, args...).Int64Slice()
		if err != nil {
			return h, err
		}
		if len(res) != 3 {
			return h, fmt.Errorf("unexpected answer %v", res)
		}
		if res[0] < 0 {
			return h, nil // the bucket is gone: Restore rebuilds it
		}
		h = h.Add(ports.Healed{Restored: int(res[0]), Retaken: int(res[1]), Oversold: int(res[2])})
	}
	return h, nil
}

// lacking returns the orders none of their user's places holds (held or
// forfeited) while one place is free: what heal.lua puts back.
func (g *Gate) lacking(ctx context.Context, buyers string, orders []domain.VoucherOrder, limit int) ([]domain.VoucherOrder, error) {
	var out []domain.VoucherOrder
	per := max(healChunk/limit, 1) // orders per HMGET
	for batch := range slices.Chunk(orders, per*restorePipeline) {
		pipe := g.rdb.Pipeline()
		var cmds []*redis.SliceCmd
		for chunk := range slices.Chunk(batch, per) {
			fields := make([]string, 0, len(chunk)*limit)
			for _, o := range chunk {
				for n := 1; n <= limit; n++ {
					fields = append(fields, redisschema.PlaceField(o.UserID(), n))
				}
			}
			cmds = append(cmds, pipe.HMGet(ctx, buyers, fields...))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("read buyers: %w", err)
		}
		for i, o := range batch {
			j := i % per * limit
			if lacks(o, cmds[i/per].Val()[j:j+limit]) {
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// lacks tells whether a user's places (as HMGET read them) hold neither o nor
// its forfeit, and one is free.
func lacks(o domain.VoucherOrder, places []any) bool {
	free := false
	for _, p := range places {
		mark, ok := p.(string)
		if !ok {
			free = true
			continue
		}
		if id, _, ok := redisschema.ParseMark(mark); ok && id == o.ID() {
			return false
		}
	}
	return free
}

// returnChunk bounds one return script, which holds Redis while it runs (500
// cost about one claim pipeline's work).
const returnChunk = 500

// Return runs return.lua once per home bucket and chunk of orders: an expiry
// pass of 500 orders is one round trip. Its returned set costs one member per
// cancelled order while the sale's keys live.
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

// errFrozen: a bucket a restore froze gives nothing back until it is done.
var errFrozen = errors.New("the bucket is being restored: nothing given back, try again")

// returnTo returns orders whose home is bucket k and answers the units given
// back; restoring is the restore's own call, into a bucket it froze.
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

// byVoucher groups orders by voucher, in order of first appearance.
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
