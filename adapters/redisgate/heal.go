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

// healChunk bounds one HMGET of the diff and one heal script: a script
// holds Redis while it runs, so a sale with many forgotten buyers is healed
// in steps of this many HSETNX, each atomic on its own.
const healChunk = 500

// Counts costs two pipelined round trips (on a cluster, one per master
// each): every voucher's K (kinds), then an HLEN of the buyers hash and an
// HGET of the stock per bucket, and for a split voucher the units of its
// transfer records (HVALS), which count as stock: a record applied but not
// yet deleted counts its units twice for a moment, which can only start a
// heal that finds nothing to put back.
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

// Heal first finds which of the orders their users' places in the home
// bucket's buyers hash lack (HMGET in chunks, pipelined: read only, so a
// false alarm writes nothing), then puts them back with heal.lua, one atomic
// script per chunk, which checks each place again: a claim that took the
// place meanwhile keeps it. A split voucher's home bucket that holds fewer
// units than it lacks marks first takes units from the others by transfers
// (pull), so a unit counts as oversold only when no bucket has one left.
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

// lacking returns the orders that none of their user's places holds (held
// or forfeited) while one of the places is free: what heal.lua puts back.
// With one order per user that is a user without a mark.
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

// lacks tells whether places (a user's, as HMGET read them) neither hold o
// nor its forfeit, and one of them is free.
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
