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

// Rebuilding a voucher's gate from the database: one path for both layouts,
// an unsplit voucher being the case of one bucket and no transfers.

// Restore writes the buckets of v that the gate lacks from the database's
// stock and buyers, leaves the ones it holds, and reports whether it wrote
// any (restore).
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

// restore rebuilds the buckets Redis lost (force: all of them), leaves the
// ones it kept, and reports whether it wrote any. A bucket's buyers are staged
// in chunks (stage) and swapped in by write.lua: the visible step is atomic
// and O(1) however many buyers, and a crash leaves no half-written set. With
// every bucket present and serving, and no force, it only puts back the
// live-set entries and a split voucher's K key (announce). Otherwise:
//
//  1. a split voucher, under a per-voucher lock, is frozen and fenced and its
//     transfer records finished (quiesce), so nothing moves its units. An
//     unsplit voucher has no transfers, and while its gate is absent
//     claim.lua answers not_found, so its stream only shrinks: nothing to
//     fence, no wait (claim.lua does not read 'frozen', for speed: a freeze
//     would not stop its claims anyway);
//  2. count what Redis holds: the kept buckets' stock, and every bucket
//     stream's entries, orders sold and not yet in MySQL (the consumer
//     deletes an entry once its order is written), whose buyers keep their
//     places in the buckets written (domain.KeepQueued): a buyer waiting
//     for the database is refused a second order, as before the loss;
//  3. read the database after that (Options.Vouchers/Orders when set): an
//     order committed in between is counted twice (undersold, never
//     oversold), where with the caller's earlier read one committed, and its
//     entry deleted, between that read and the count would be in neither;
//  4. write the buckets to rebuild with the units left, split evenly, and the
//     buyers whose home each is: a split voucher's placeholders ('restore',
//     frozen until all are written, then unfrozen); an unsplit voucher's one
//     bucket ('fill': only if still absent, so a Preheat or Restore that
//     landed since the check keeps its gate and claims; or 'overwrite').
//
// An unsplit rebuild keeps its queued orders too: a voucher hash lost while
// its stream survived (an eviction, a DEL) had sold those units, and from
// MySQL's stock alone the gate would sell them again for the database to
// refuse. That costs a rebuild a read of its stream and the database read,
// no fence; a present gate costs what it did. An unsplit Overwrite skips 2
// and 3: nothing freezes its gate, so its stream moves under any count, and
// it writes the caller's state exactly, as it promises; reconcile calls it
// only once the stream is drained. A split restore that dies part way leaves
// frozen buckets, which Missing reports, so the next repair runs it again:
// every count is from the database's truth, so a second run is correct
// whatever the first wrote.
func (g *Gate) restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder, force bool) (bool, error) {
	if err := v.CheckGateable(); err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	// Checked before anything is written: a refused restore writes nothing.
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
		// Once buckets are frozen, stopping half way leaves the sale
		// answering busy until the next repair: the restore runs to its end
		// on its own deadline, whatever the caller's (the periodic repair's
		// may be shorter than the fence).
		// Its budget: the fence plus ample time for the rest.
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
	// The live-set entries go first, as in Preheat: a restored gate must
	// never accept claims that no stream consumer will look for.
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
		if count {
			// A claim's entry is in its user's home bucket's stream: only a
			// bucket written here needs its buyers, a kept one its length.
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
		// The pool comes from the database's stock, which holds every unit
		// admins added: bucket 0, which survived, counts them as taken, or
		// the repair's Apply would add the ones it never took again. Before
		// the writes: a restore that dies after them leaves the buckets
		// written and frozen, and the next one only unfreezes them (quiesce).
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
		if err := g.fault("written"); err != nil {
			return wrote, err
		}
		if err := g.unfreeze(ctx, l); err != nil {
			return false, err
		}
	}
	// Again after the write, as in Preheat: a prune between the first entry
	// and the write may have removed it while no bucket hash existed (prune).
	return wrote, g.addLive(ctx, l)
}

// announce writes a split voucher's K key, which lives in another slot than
// its buckets and may be lost alone (without it, a process that has not
// cached K routes the voucher's claims to the unsplit gate: not found), and
// every bucket's live-set entry.
func (g *Gate) announce(ctx context.Context, v domain.Voucher, l *layout) error {
	if l.k > 1 {
		if err := g.setMeta(ctx, v, l.k); err != nil {
			return fmt.Errorf("voucher %d: %w", v.ID(), err)
		}
	}
	return g.addLive(ctx, l)
}

// unreturnedMax bounds the cancelled orders a restore reads to give back:
// more than that waiting for the gate is a returner far behind, and the
// restore is tried again at the next repair instead.
const unreturnedMax = 100_000

// returnKept gives back, into the buckets the restore keeps (frozen, their
// stock counted), the units of the orders the database has cancelled and
// the gate not yet taken back, and answers how many it gave. The database's
// stock, read before, holds those units already: without this, the pool
// written to the lost buckets would hold them too, and the returner's
// Return after the restore would add them a second time to the kept
// buckets, which hold their marks (a unit sold twice, the second sale
// refused by the database). Given back here, the mark is forfeited (or
// freed), so the returner's Return finds nothing more. It reads the list
// after the database's stock: a cancellation committed in between is given
// back here though the stock read missed it, which undersells by its unit,
// never oversells. A lost bucket's orders need nothing: it is rebuilt from
// the database's buyers, where a cancelled order holds no unit.
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

// quiesce is step 1 of a split voucher's restore (force: its buckets deleted
// first). It freezes every bucket (claims answer busy; transfers neither take
// nor apply), a frozen, empty placeholder where one is missing; waits
// ApplyDeadline+Skew, after which no claim can apply a transfer it took
// before the freeze (apply.lua refuses past the deadline); and finishes every
// transfer record (forced apply, then delete). Each unit then sits in one
// bucket's stock, and it answers their states; or done when no bucket is a
// placeholder once frozen: a restore that died after writing them all left
// them right, and they are unfrozen.
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

// writeBucket stages the marks of the users whose home is bucket b and runs
// write.lua in mode on it, and reports whether it wrote.
func (g *Gate) writeBucket(ctx context.Context, v domain.Voucher, l *layout, b, stock int, mode string, marks map[domain.UserID][]domain.OrderID) (bool, error) {
	bk := l.buckets[b]
	staging := bk.Staging(randomToken())
	staged, err := g.stage(ctx, staging, marks, l.k, b)
	if err != nil {
		// Best effort: the TTL reclaims it otherwise.
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

// write runs write.lua in mode on bucket b (bk) of sale s: stock units, and
// the staged buyers in the staging hash.
func (g *Gate) write(ctx context.Context, s domain.Sale, bk redisschema.Keys, b int, staging string, stock, staged int, mode string) (int64, error) {
	return g.scripts.Run(ctx, g.rdb, writeScript, []string{bk.Voucher, bk.Buyers, staging},
		stock, s.Begin().UnixMilli(), s.End().UnixMilli(), g.expireAt(s).UnixMilli(), staged, mode,
		boolArg(s.Paused()), addedArg(s, b), s.LimitPerUser()).Int64()
}

// stage writes the marks of the users whose home of k buckets is b into a
// staging hash, one field per place (redisschema.PlaceField), in HSETs of
// restoreChunk fields (the first with the hash's TTL) sent restorePipeline
// at a time, and returns how many fields it wrote.
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
		pipe.HSet(ctx, key, args[start:min(start+2*restoreChunk, len(args))]...)
		if start == 0 {
			pipe.PExpire(ctx, key, stagingTTL)
		}
		if pipe.Len() >= restorePipeline {
			if _, err := pipe.Exec(ctx); err != nil {
				return 0, err
			}
		}
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, err
		}
	}
	return len(args) / 2, nil
}

// raiseAddedScript raises a bucket hash's 'added' (the units added by admins
// its gate has taken) to ARGV[1], never lowers it: a control applied during
// the restore may have raised it further. KEYS[1] bucket hash.
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

// queuedIn counts a stream's entries (each holds a unit: its order was sold
// and is not yet in the database, or is and its entry not yet deleted) and,
// with orders, reads the orders they carry. An entry that carries no valid
// order still counts; it gives no buyer a place.
func (g *Gate) queuedIn(ctx context.Context, id domain.VoucherID, stream string, withOrders bool) (int64, []domain.VoucherOrder, error) {
	if !withOrders {
		n, err := g.rdb.XLen(ctx, stream).Result()
		return n, nil, err
	}
	orders, n, err := g.ordersIn(ctx, id, stream, math.MaxInt)
	return int64(n), orders, err
}
