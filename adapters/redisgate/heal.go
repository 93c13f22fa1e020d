package redisgate

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var (
	//go:embed heal.lua
	healLua    string
	healScript = redis.NewScript(healLua)
)

// errHealSplit: Counts never reports a split voucher, so nothing should ask.
var errHealSplit = errors.New("healing a split voucher's buckets is not supported")

// healChunk bounds one HMGET of the diff and one heal script: a script
// holds Redis while it runs, so a sale with many forgotten buyers is healed
// in steps of this many HSETNX, each atomic on its own.
const healChunk = 500

// Counts costs one pipelined round trip: an HLEN of the buyers hash and an
// HGET of the stock per voucher (on a cluster, one round trip per master).
//
// It reports the unsplit vouchers only: a split voucher keeps its buyers and
// units spread over its buckets (and units in transfer records), and Heal
// does not repair it yet, so it is left out as if the gate did not hold it.
// Its K costs one pipelined round trip more (kinds).
func (g *Gate) Counts(ctx context.Context, all []domain.VoucherID) (map[domain.VoucherID]ports.GateCount, error) {
	out := make(map[domain.VoucherID]ports.GateCount, len(all))
	if len(all) == 0 {
		return out, nil
	}
	ls, err := g.kinds(ctx, all)
	if err != nil {
		return nil, err
	}
	var ids []domain.VoucherID
	for _, l := range ls {
		if l.k == 1 {
			ids = append(ids, l.id)
		}
	}
	pipe := g.rdb.Pipeline()
	buyers := make([]*redis.IntCmd, len(ids))
	stock := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		k := g.keys(id)
		buyers[i] = pipe.HLen(ctx, k.Buyers)
		stock[i] = pipe.HGet(ctx, k.Voucher, "stock")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("count %d vouchers' buyers: %w", len(ids), err)
	}
	for i, id := range ids {
		s, err := stock[i].Int()
		if errors.Is(err, redis.Nil) {
			continue // no gate: Missing reports it
		}
		if err != nil {
			return nil, fmt.Errorf("stock of voucher %d: %w", id, err)
		}
		out[id] = ports.GateCount{Buyers: int(buyers[i].Val()), Stock: s}
	}
	return out, nil
}

// Heal first finds which of the orders' users the buyers hash lacks (HMGET in
// chunks, pipelined: read only, so a false alarm writes nothing), then puts
// them back with heal.lua, one atomic script per chunk, which checks each
// mark again (HSETNX): a claim that marked the user meanwhile keeps its mark.
func (g *Gate) Heal(ctx context.Context, v domain.Voucher, orders []domain.VoucherOrder) (ports.Healed, error) {
	var h ports.Healed
	if err := checkVoucher(v); err != nil {
		return h, fmt.Errorf("heal: %w", err)
	}
	if g.kOf(v) > 1 {
		return h, fmt.Errorf("heal voucher %d: %w", v.ID(), errHealSplit)
	}
	marks, err := domain.BuyerMarks(v.ID(), orders)
	if err != nil {
		return h, fmt.Errorf("heal: %w", err)
	}
	k := g.keys(v.ID())
	lacking, err := g.lacking(ctx, k.Buyers, orders)
	if err != nil {
		return h, fmt.Errorf("heal voucher %d: %w", v.ID(), err)
	}
	for start := 0; start < len(lacking); start += healChunk {
		chunk := lacking[start:min(start+healChunk, len(lacking))]
		args := make([]any, 0, 1+2*len(chunk))
		args = append(args, g.retention.Milliseconds())
		for _, o := range chunk {
			args = append(args, int64(o.UserID()), int64(marks[o.UserID()]))
		}
		res, err := g.scripts.Run(ctx, g.rdb, healScript, []string{k.Voucher, k.Buyers, k.Returned()}, args...).Int64Slice()
		if err != nil {
			return h, fmt.Errorf("heal voucher %d: %w", v.ID(), err)
		}
		if len(res) != 3 {
			return h, fmt.Errorf("heal voucher %d: unexpected answer %v", v.ID(), res)
		}
		if res[0] < 0 {
			return h, nil // the gate is gone: Restore rebuilds it whole
		}
		h = h.Add(ports.Healed{Restored: int(res[0]), Retaken: int(res[1]), Oversold: int(res[2])})
	}
	return h, nil
}

// lacking returns the orders whose user has no mark in the buyers hash.
func (g *Gate) lacking(ctx context.Context, buyers string, orders []domain.VoucherOrder) ([]domain.VoucherOrder, error) {
	var out []domain.VoucherOrder
	for start := 0; start < len(orders); {
		pipe := g.rdb.Pipeline()
		var cmds []*redis.SliceCmd
		var chunks [][]domain.VoucherOrder
		for ; start < len(orders) && len(cmds) < restorePipeline; start += healChunk {
			chunk := orders[start:min(start+healChunk, len(orders))]
			fields := make([]string, len(chunk))
			for i, o := range chunk {
				fields[i] = strconv.FormatInt(int64(o.UserID()), 10)
			}
			cmds = append(cmds, pipe.HMGet(ctx, buyers, fields...))
			chunks = append(chunks, chunk)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("read buyers: %w", err)
		}
		for c, cmd := range cmds {
			for i, mark := range cmd.Val() {
				if mark == nil {
					out = append(out, chunks[c][i])
				}
			}
		}
	}
	return out, nil
}
