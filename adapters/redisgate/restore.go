package redisgate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// Restore writes the buckets of v that the gate lacks from the database's stock
// and buyers, leaves the ones it holds, and reports whether it wrote any.
func (g *Gate) Restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) (bool, error) {
	return g.restore(ctx, v, buyers, false)
}

// Overwrite replaces the voucher's gate state with the database's (`seckill
// reconcile --fix`): run it only while no claims are served, or a claim
// between the database read and the swap is forgotten.
func (g *Gate) Overwrite(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) error {
	_, err := g.restore(ctx, v, buyers, true)
	return err
}

// restore rebuilds the buckets Redis lost (force: all of them) and reports whether
// it wrote any; with every bucket serving and no force it only announces. Buyers
// are staged and swapped in by write.lua, so a crash leaves no half-written set:
//
//  1. a split voucher is locked, frozen, fenced and its transfers finished
//     (quiesce); an unsplit one needs no fence: without its gate no claim succeeds;
//  2. count kept buckets' stock and every stream's entries, whose buyers keep
//     their places (domain.KeepQueued): else queued units would be sold again;
//  3. read the database after that: an order committed in between counts twice (undersold);
//  4. write the lost buckets with the units left, split evenly: 'restore'
//     placeholders, frozen until all are written; unsplit, 'fill' or 'overwrite'.
//
// An unsplit Overwrite skips 2 and 3 and writes the caller's state exactly. A split
// restore that dies part way leaves frozen buckets (Missing); the next run recounts.
func (g *Gate) restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder, force bool) (bool, error) {
	if err := v.CheckGateable(); err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	if _, err := domain.BuyerMarks(v, buyers); err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	id, l := v.ID(), g.known(v.ID(), g.kOf(v))
	k := l.k
	st, err := g.states(ctx, l)
	if err != nil {
		return false, err
	}
	if !force && allServing(st) {
		return false, g.announce(ctx, v, l)
	}
	if k > 1 {
		// Stopping once buckets are frozen leaves the sale busy: run on a budget of its own.
		budget := 2*(g.opts.ApplyDeadline+g.opts.Skew) + time.Minute
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), budget)
		defer cancel()
		lock, token := redisschema.BucketLock(g.prefix, id), randomToken()
		ok, err := g.rdb.SetNX(ctx, lock, token, budget).Result()
		if err != nil {
			return false, fmt.Errorf("restore voucher %d: lock: %w", id, err)
		}
		if !ok {
			return false, nil // another instance is restoring it
		}
		defer func() {
			_ = redisx.Release(context.WithoutCancel(ctx), g.rdb, lock, token)
		}()
	}
	// First, as in Preheat: no claim without a consumer looking for it.
	if err := g.announce(ctx, v, l); err != nil {
		return false, err
	}
	if k == 1 {
		st = []bucketState{{placeholder: true}} // its one bucket is written whole
	} else {
		var done bool
		if st, done, err = g.quiesce(ctx, v, l, force); err != nil || done {
			return done, err
		}
	}
	count := k > 1 || !force // an unsplit Overwrite writes the caller's state exactly
	var kept, queued int64
	var inStream []domain.VoucherOrder
	var lost []int
	for b, bk := range l.buckets {
		if st[b].placeholder {
			lost = append(lost, b)
		} else {
			kept += st[b].stock
		}
		if count { // a kept bucket needs only its stream's length, a lost one its buyers
			n, orders, err := g.queuedIn(ctx, id, bk.Orders, st[b].placeholder)
			if err != nil {
				return false, fmt.Errorf("restore voucher %d: stream of bucket %d: %w", id, b, err)
			}
			queued += n
			inStream = append(inStream, orders...)
		}
	}
	if count && g.opts.Vouchers != nil {
		if v, err = g.opts.Vouchers.Get(ctx, id); err != nil {
			return false, fmt.Errorf("restore voucher %d: %w", id, err)
		}
	}
	if count && g.opts.Orders != nil {
		if buyers, err = g.opts.Orders.Buyers(ctx, id); err != nil {
			return false, fmt.Errorf("restore voucher %d: %w", id, err)
		}
	}
	marks, err := domain.BuyerMarks(v, buyers)
	if err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	domain.KeepQueued(marks, v.Sale(), inStream)
	var given int64
	if count && k > 1 {
		if given, err = g.returnKept(ctx, l, st); err != nil {
			return false, fmt.Errorf("restore voucher %d: %w", id, err)
		}
	}
	// Below 0, Redis holds more than the database allows: reconcile shows it.
	pool := max(int64(v.Sale().Stock())-kept-queued-given, 0)
	mode := "restore"
	if k == 1 {
		mode = "fill"
		if force {
			mode = "overwrite"
		}
	}
	if k > 1 && !st[0].placeholder {
		// The pool holds every unit added: a kept bucket 0 counts them taken, or
		// Apply would add them again; before the writes, which the next run keeps.
		if err := g.scripts.Run(ctx, g.rdb, raiseAddedScript, []string{l.buckets[0].Voucher}, v.Sale().Added()).Err(); err != nil {
			return false, fmt.Errorf("restore voucher %d: count the added units taken: %w", id, err)
		}
	}
	wrote := false
	for i, b := range lost {
		w, err := g.writeBucket(ctx, v, l, b, split(int(pool), i, len(lost)), mode, marks)
		if err != nil {
			return false, err
		}
		wrote = wrote || w
	}
	if k > 1 {
		if err := g.opts.Fault("written"); err != nil {
			return wrote, err
		}
		if err := g.unfreeze(ctx, l); err != nil {
			return false, err
		}
	}
	// Again, as in Preheat: a prune before the write may have removed it.
	return wrote, g.addLive(ctx, l)
}

// announce writes a split voucher's K key (which may be lost alone) and every bucket's live-set entry.
func (g *Gate) announce(ctx context.Context, v domain.Voucher, l *layout) error {
	if l.k > 1 {
		if err := g.setMeta(ctx, v, l.k); err != nil {
			return fmt.Errorf("voucher %d: %w", v.ID(), err)
		}
	}
	return g.addLive(ctx, l)
}

// unreturnedMax bounds the cancelled orders a restore gives back; more: the next repair tries.
const unreturnedMax = 100_000

// returnKept gives back into the kept buckets the units of cancelled orders the
// gate was not given back, and answers how many: the database's stock holds them
// already, and the returner's later Return would add them again.
func (g *Gate) returnKept(ctx context.Context, l *layout, st []bucketState) (int64, error) {
	if g.opts.Unreturned == nil {
		return 0, nil
	}
	all, err := g.opts.Unreturned(ctx, unreturnedMax)
	if err != nil {
		return 0, fmt.Errorf("list cancelled orders not returned: %w", err)
	}
	if len(all) >= unreturnedMax {
		return 0, fmt.Errorf("%d or more cancelled orders wait to be returned: restore later", unreturnedMax)
	}
	var given int64
	for b, orders := range l.byHome(all) {
		if st[b].placeholder {
			continue
		}
		orders = slices.DeleteFunc(orders, func(o domain.VoucherOrder) bool { return o.VoucherID() != l.id })
		n, err := g.returnTo(ctx, l.buckets[b], orders, true)
		given += n
		if err != nil {
			return given, fmt.Errorf("give back the cancelled orders of bucket %d: %w", b, err)
		}
	}
	return given, nil
}

// quiesce is step 1 of a split restore (force: buckets deleted first): it freezes
// every bucket (a placeholder where one is missing), waits ApplyDeadline+Skew so
// no claim can apply a transfer it took before, and finishes every record.
// done: no placeholder once frozen (a dead restore wrote them all): unfrozen.
func (g *Gate) quiesce(ctx context.Context, v domain.Voucher, l *layout, force bool) ([]bucketState, bool, error) {
	id, s := v.ID(), v.Sale()
	for b, bk := range l.buckets {
		if force {
			if err := g.rdb.Del(ctx, bk.Voucher, bk.Buyers).Err(); err != nil {
				return nil, false, fmt.Errorf("overwrite voucher %d bucket %d: %w", id, b, err)
			}
		}
		if err := g.scripts.Run(ctx, g.rdb, freezeScript, []string{bk.Voucher},
			s.Begin().UnixMilli(), s.End().UnixMilli(), g.expireAt(s).UnixMilli()).Err(); err != nil {
			return nil, false, fmt.Errorf("restore voucher %d: freeze bucket %d: %w", id, b, err)
		}
	}
	st, err := g.states(ctx, l)
	if err != nil {
		return nil, false, err
	}
	if !slices.ContainsFunc(st, func(s bucketState) bool { return s.placeholder }) {
		return nil, true, g.unfreeze(ctx, l)
	}
	select {
	case <-time.After(g.opts.ApplyDeadline + g.opts.Skew):
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	if _, err := g.finish(ctx, l, math.MaxInt64, true); err != nil {
		return nil, false, fmt.Errorf("restore voucher %d: %w", id, err)
	}
	st, err = g.states(ctx, l)
	return st, false, err
}

// writeBucket stages bucket b's users' marks and runs write.lua in mode on it.
func (g *Gate) writeBucket(ctx context.Context, v domain.Voucher, l *layout, b, stock int, mode string, marks map[domain.UserID][]domain.OrderID) (bool, error) {
	bk := l.buckets[b]
	staging := bk.Staging(randomToken())
	staged, err := g.stage(ctx, staging, marks, l.k, b)
	if err != nil {
		_ = g.rdb.Del(context.WithoutCancel(ctx), staging).Err()
		return false, fmt.Errorf("restore voucher %d bucket %d: stage buyers: %w", v.ID(), b, err)
	}
	code, err := g.write(ctx, v.Sale(), bk, b, staging, stock, staged, mode)
	if err != nil {
		return false, fmt.Errorf("restore voucher %d bucket %d: %w", v.ID(), b, err)
	}
	if code < 0 { // -1: the staged buyers expired before the swap; -2: another sale's window
		return false, fmt.Errorf("restore voucher %d bucket %d: write answered %d", v.ID(), b, code)
	}
	return code == 1, nil
}

// write runs write.lua in mode on bucket b (bk): stock units, staged buyers.
func (g *Gate) write(ctx context.Context, s domain.Sale, bk redisschema.Keys, b int, staging string, stock, staged int, mode string) (int64, error) {
	return g.scripts.Run(ctx, g.rdb, writeScript, []string{bk.Voucher, bk.Buyers, staging},
		stock, s.Begin().UnixMilli(), s.End().UnixMilli(), g.expireAt(s).UnixMilli(), staged, mode,
		boolArg(s.Paused()), addedArg(s, b), s.LimitPerUser()).Int64()
}

// stage writes the marks of bucket b's users into a staging hash and returns how many.
func (g *Gate) stage(ctx context.Context, key string, marks map[domain.UserID][]domain.OrderID, k, b int) (int, error) {
	var args []any
	for u, places := range marks {
		if redisschema.HomeBucket(u, k) != b {
			continue
		}
		for i, id := range places {
			args = append(args, redisschema.PlaceField(u, i+1), int64(id))
		}
	}
	pipe := g.rdb.Pipeline()
	for start := 0; start < len(args); start += 2 * restoreChunk {
		end := min(start+2*restoreChunk, len(args))
		pipe.HSet(ctx, key, args[start:end]...)
		if start == 0 {
			pipe.PExpire(ctx, key, stagingTTL)
		}
		if pipe.Len() >= restorePipeline || end == len(args) {
			if _, err := pipe.Exec(ctx); err != nil {
				return 0, err
			}
		}
	}
	return len(args) / 2, nil
}

// raiseAddedScript raises a bucket's 'added' to ARGV[1], never lowers it (a control meanwhile may have).
var raiseAddedScript = redis.NewScript(`
if tonumber(redis.call('HGET', KEYS[1], 'added') or '0') < tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'added', ARGV[1])
end
return 0`)

func (g *Gate) unfreeze(ctx context.Context, l *layout) error {
	for b, bk := range l.buckets {
		if err := g.rdb.HDel(ctx, bk.Voucher, "frozen").Err(); err != nil {
			return fmt.Errorf("restore voucher %d: unfreeze bucket %d: %w", l.id, b, err)
		}
	}
	return nil
}

// bucketState is what a restore sees of one bucket.
type bucketState struct {
	exists, frozen, placeholder bool
	stock                       int64
}

func (g *Gate) states(ctx context.Context, l *layout) ([]bucketState, error) {
	pipe := g.rdb.Pipeline()
	cmds := stateCmds(ctx, pipe, l)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("buckets of voucher %d: %w", l.id, err)
	}
	return parseStates(l.id, cmds)
}

// stateCmds queues an HMGET of each of the voucher's bucket hashes.
func stateCmds(ctx context.Context, pipe redis.Pipeliner, l *layout) []*redis.SliceCmd {
	cmds := make([]*redis.SliceCmd, l.k)
	for b, bk := range l.buckets {
		cmds[b] = pipe.HMGet(ctx, bk.Voucher, "stock", "frozen", "placeholder")
	}
	return cmds
}

func parseStates(id domain.VoucherID, cmds []*redis.SliceCmd) ([]bucketState, error) {
	out := make([]bucketState, len(cmds))
	for b, c := range cmds {
		v := c.Val()
		if len(v) < 3 || v[0] == nil {
			continue
		}
		n, err := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("voucher %d bucket %d: bad stock %v", id, b, v[0])
		}
		out[b] = bucketState{exists: true, frozen: v[1] != nil, placeholder: v[2] != nil, stock: n}
	}
	return out, nil
}

func allServing(st []bucketState) bool {
	return !slices.ContainsFunc(st, func(s bucketState) bool { return !s.exists || s.frozen || s.placeholder })
}

// queuedIn counts a stream's entries (each holds a unit) and, withOrders, reads their orders.
func (g *Gate) queuedIn(ctx context.Context, id domain.VoucherID, stream string, withOrders bool) (int64, []domain.VoucherOrder, error) {
	if !withOrders {
		n, err := g.rdb.XLen(ctx, stream).Result()
		return n, nil, err
	}
	orders, n, err := g.ordersIn(ctx, id, stream, math.MaxInt)
	return int64(n), orders, err
}
