package redisbuckets

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// bucketState is what a restore sees of one bucket.
type bucketState struct {
	exists, frozen, placeholder bool
	stock                       int64
}

func (g *Gate) states(ctx context.Context, id domain.VoucherID, k int) ([]bucketState, error) {
	pipe := g.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, k)
	for b := range k {
		cmds[b] = pipe.HMGet(ctx, g.bucket(id, b, k).Voucher, "stock", "frozen", "placeholder")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("buckets of voucher %d: %w", id, err)
	}
	out := make([]bucketState, k)
	for b, c := range cmds {
		v := c.Val()
		if v[0] == nil {
			continue
		}
		n, err := strconv.ParseInt(v[0].(string), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("voucher %d bucket %d: bad stock %v", id, b, v[0])
		}
		out[b] = bucketState{exists: true, frozen: v[1] != nil, placeholder: v[2] != nil, stock: n}
	}
	return out, nil
}

// Restore rebuilds the buckets Redis lost from the database, leaving the ones
// it kept, and reports whether it wrote anything. All K buckets present and
// serving: nothing to do. Otherwise, under a per-voucher lock:
//
//  1. freeze every bucket (claims answer busy; transfers neither take nor
//     apply) and put a frozen, empty placeholder where a bucket is missing;
//  2. wait ApplyDeadline+Skew, after which no claim can apply a transfer it
//     took before the freeze (apply.lua refuses past the deadline), so no
//     unit can arrive that the count below does not see;
//  3. finish every transfer record (apply, forced, then delete): units then
//     sit only in bucket stock;
//  4. count what Redis still holds: the stock of the buckets it kept, and the
//     unfinished entries of every bucket's stream (sold, not yet in MySQL);
//  5. read the database after that (Options.Vouchers/Orders when set), so an
//     order committed meanwhile is counted twice (undersold, never oversold);
//  6. give the placeholders the rest, split evenly, with the buyers whose home
//     they are, then unfreeze all.
//
// A restore that dies part way leaves frozen buckets, which Missing reports,
// so the next repair runs it again; every count is from the database's truth,
// so a second run is correct whatever the first wrote.
func (g *Gate) Restore(ctx context.Context, v domain.Voucher, k int, buyers []domain.VoucherOrder) (bool, error) {
	return g.restore(ctx, v, k, buyers, false)
}

// Overwrite rebuilds every bucket from the database, whatever Redis holds
// (reconcile --fix). Only safe while no claims are served and the streams are
// empty.
func (g *Gate) Overwrite(ctx context.Context, v domain.Voucher, k int, buyers []domain.VoucherOrder) error {
	_, err := g.restore(ctx, v, k, buyers, true)
	return err
}

func (g *Gate) restore(ctx context.Context, v domain.Voucher, k int, buyers []domain.VoucherOrder, force bool) (bool, error) {
	if err := checkVoucher(v, k); err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	id := v.ID()
	st, err := g.states(ctx, id, k)
	if err != nil {
		return false, err
	}
	if !force && allServing(st) {
		// The K key lives in another slot than the buckets and may be lost
		// alone; without it a process that has not cached K would route the
		// voucher's claims to the unsplit gate (not found).
		if err := g.setMeta(ctx, v, k); err != nil {
			return false, fmt.Errorf("restore voucher %d: %w", id, err)
		}
		return false, g.addLive(ctx, id, k)
	}
	// Once buckets are frozen, stopping half way leaves the sale answering
	// busy until the next repair: the restore runs to its end on its own
	// deadline, whatever the caller's (the periodic repair's may be shorter
	// than the fence).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.restoreBudget())
	defer cancel()
	lock := redisschema.BucketLock(g.prefix, id)
	token := newTransferID()
	ok, err := g.rdb.SetNX(ctx, lock, token, g.restoreBudget()).Result()
	if err != nil {
		return false, fmt.Errorf("restore voucher %d: lock: %w", id, err)
	}
	if !ok {
		return false, nil // another instance is restoring it
	}
	defer func() {
		c := context.WithoutCancel(ctx)
		if cur, _ := g.rdb.Get(c, lock).Result(); cur == token {
			_ = g.rdb.Del(c, lock).Err()
		}
	}()
	if err := g.setMeta(ctx, v, k); err != nil {
		return false, fmt.Errorf("restore voucher %d: %w", id, err)
	}
	if err := g.addLive(ctx, id, k); err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	s := v.Sale()
	if force {
		for b := range k {
			bk := g.bucket(id, b, k)
			if err := g.rdb.Del(ctx, bk.Voucher, bk.Buyers).Err(); err != nil {
				return false, fmt.Errorf("overwrite voucher %d bucket %d: %w", id, b, err)
			}
		}
	}
	// 1. freeze
	for b := range k {
		if err := g.scripts.Run(ctx, g.rdb, freezeScript, []string{g.bucket(id, b, k).Voucher},
			s.Begin().UnixMilli(), s.End().UnixMilli(), g.expireAt(s).UnixMilli()).Err(); err != nil {
			return false, fmt.Errorf("restore voucher %d: freeze bucket %d: %w", id, b, err)
		}
	}
	if st, err = g.states(ctx, id, k); err != nil {
		return false, err
	}
	if !anyPlaceholder(st) {
		// A restore that died after writing every bucket: they are right.
		return true, g.unfreeze(ctx, id, k)
	}
	// 2. fence
	select {
	case <-time.After(g.opts.ApplyDeadline + g.opts.Skew):
	case <-ctx.Done():
		return false, ctx.Err()
	}
	// 3. finish every record
	recs, err := g.records(ctx, id, k)
	if err != nil {
		return false, err
	}
	for d, rs := range recs {
		for _, r := range rs {
			if _, err := g.apply(ctx, g.bucket(id, r.to, k), r.id, r.n, r.created, 0, true); err != nil {
				return false, fmt.Errorf("restore voucher %d: finish transfer %s: %w", id, r.id, err)
			}
			if err := g.rdb.HDel(ctx, g.bucket(id, d, k).Transfers(), r.id).Err(); err != nil {
				return false, fmt.Errorf("restore voucher %d: finish transfer %s: %w", id, r.id, err)
			}
		}
	}
	// 4. count Redis
	if st, err = g.states(ctx, id, k); err != nil {
		return false, err
	}
	var kept, queued int64
	for b := range k {
		if !st[b].placeholder {
			kept += st[b].stock
		}
		n, err := g.rdb.XLen(ctx, g.bucket(id, b, k).Orders).Result()
		if err != nil {
			return false, fmt.Errorf("restore voucher %d: stream of bucket %d: %w", id, b, err)
		}
		queued += n
	}
	// 5. the database, read after Redis
	if g.opts.Vouchers != nil {
		if v, err = g.opts.Vouchers.Get(ctx, id); err != nil {
			return false, fmt.Errorf("restore voucher %d: %w", id, err)
		}
	}
	if g.opts.Orders != nil {
		if buyers, err = g.opts.Orders.Buyers(ctx, id); err != nil {
			return false, fmt.Errorf("restore voucher %d: %w", id, err)
		}
	}
	marks, err := domain.BuyerMarks(id, buyers)
	if err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	pool := int64(v.Sale().Stock()) - kept - queued
	if pool < 0 {
		pool = 0 // Redis holds more than the database allows: reconcile shows it
	}
	// 6. write the placeholders
	var lost []int
	for b := range k {
		if st[b].placeholder {
			lost = append(lost, b)
		}
	}
	for i, b := range lost {
		home := map[domain.UserID]domain.OrderID{}
		for u, o := range marks {
			if redisschema.HomeBucket(u, k) == b {
				home[u] = o
			}
		}
		if err := g.writeRestored(ctx, v, k, b, split(int(pool), i, len(lost)), home); err != nil {
			return false, err
		}
	}
	if len(lost) > 0 && !st[0].placeholder {
		// The pool came from the database's stock, which holds every unit
		// admins added: bucket 0, which survived, now counts them as taken,
		// or the repair's Apply would add the ones it never took again.
		bk := g.bucket(id, 0, k)
		if err := g.scripts.Run(ctx, g.rdb, raiseAddedScript, []string{bk.Voucher}, v.Sale().Added()).Err(); err != nil {
			return false, fmt.Errorf("restore voucher %d: count the added units taken: %w", id, err)
		}
	}
	return true, g.unfreeze(ctx, id, k)
}

// raiseAddedScript raises a bucket hash's 'added' (the units added by admins
// its gate has taken) to ARGV[1], never lowers it: a control applied during
// the restore may have raised it further. KEYS[1] bucket hash.
var raiseAddedScript = redis.NewScript(`
if tonumber(redis.call('HGET', KEYS[1], 'added') or '0') < tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'added', ARGV[1])
end
return 0`)

// restoreBudget bounds one restore: the fence plus ample time for the rest.
func (g *Gate) restoreBudget() time.Duration {
	return 2*(g.opts.ApplyDeadline+g.opts.Skew) + time.Minute
}

func (g *Gate) writeRestored(ctx context.Context, v domain.Voucher, k, b, stock int, marks map[domain.UserID]domain.OrderID) error {
	bk := g.bucket(v.ID(), b, k)
	staging := bk.Staging(newTransferID())
	args := make([]any, 0, 2*restoreChunk)
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		pipe := g.rdb.Pipeline()
		pipe.HSet(ctx, staging, args...)
		pipe.PExpire(ctx, staging, stagingTTL)
		_, err := pipe.Exec(ctx)
		args = args[:0]
		return err
	}
	for u, o := range marks {
		args = append(args, int64(u), int64(o))
		if len(args) == 2*restoreChunk {
			if err := flush(); err != nil {
				return fmt.Errorf("restore voucher %d bucket %d: stage buyers: %w", v.ID(), b, err)
			}
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("restore voucher %d bucket %d: stage buyers: %w", v.ID(), b, err)
	}
	s := v.Sale()
	code, err := g.scripts.Run(ctx, g.rdb, writeScript, []string{bk.Voucher, bk.Buyers, staging},
		stock, s.Begin().UnixMilli(), s.End().UnixMilli(), g.expireAt(s).UnixMilli(), len(marks), "restore",
		redisschema.Paused(s), addedArg(s, b)).Int()
	if err != nil {
		return fmt.Errorf("restore voucher %d bucket %d: %w", v.ID(), b, err)
	}
	if code < 0 {
		return fmt.Errorf("restore voucher %d bucket %d: write answered %d", v.ID(), b, code)
	}
	return nil
}

func (g *Gate) unfreeze(ctx context.Context, id domain.VoucherID, k int) error {
	for b := range k {
		if err := g.rdb.HDel(ctx, g.bucket(id, b, k).Voucher, "frozen").Err(); err != nil {
			return fmt.Errorf("restore voucher %d: unfreeze bucket %d: %w", id, b, err)
		}
	}
	return nil
}

func allServing(st []bucketState) bool {
	for _, s := range st {
		if !s.exists || s.frozen || s.placeholder {
			return false
		}
	}
	return true
}

func anyPlaceholder(st []bucketState) bool {
	for _, s := range st {
		if s.placeholder {
			return true
		}
	}
	return false
}

// Missing reports which of the split vouchers have a bucket missing or left
// frozen by a restore that died (GateProbe for split vouchers; K from Redis,
// so a voucher whose meta key is gone is reported too when k is given).
func (g *Gate) Missing(ctx context.Context, id domain.VoucherID, k int) (bool, error) {
	st, err := g.states(ctx, id, k)
	if err != nil {
		return false, err
	}
	if !allServing(st) {
		return true, nil
	}
	live := redisschema.LiveSet(g.prefix)
	pipe := g.rdb.Pipeline()
	cmds := make([]*redis.BoolCmd, k)
	for b := range k {
		cmds[b] = pipe.SIsMember(ctx, live, redisschema.BucketTag(id, b, k))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("live set: %w", err)
	}
	for _, c := range cmds {
		if !c.Val() {
			return true, nil
		}
	}
	return false, nil
}

// Stock is the voucher's units in Redis: every bucket's stock plus the units
// of transfer records not yet applied (a unit is in exactly one of them), and
// false when no bucket is there.
func (g *Gate) Stock(ctx context.Context, id domain.VoucherID) (int, bool, error) {
	k, err := g.Buckets(ctx, id)
	if err != nil || k < 2 {
		return 0, false, err
	}
	st, err := g.states(ctx, id, k)
	if err != nil {
		return 0, false, err
	}
	found := false
	total := int64(0)
	for _, s := range st {
		found = found || s.exists
		total += s.stock
	}
	recs, err := g.records(ctx, id, k)
	if err != nil {
		return 0, false, err
	}
	for _, rs := range recs {
		for _, r := range rs {
			applied, err := g.rdb.SIsMember(ctx, g.bucket(id, r.to, k).Applied(), r.id).Result()
			if err != nil {
				return 0, false, err
			}
			if !applied {
				total += r.n
			}
		}
	}
	return int(total), found, nil
}

// Stocks is each bucket's stock (tests and the docs' measurements).
func (g *Gate) Stocks(ctx context.Context, id domain.VoucherID) ([]int64, error) {
	k, err := g.Buckets(ctx, id)
	if err != nil {
		return nil, err
	}
	st, err := g.states(ctx, id, k)
	if err != nil {
		return nil, err
	}
	out := make([]int64, k)
	for b, s := range st {
		out[b] = s.stock
	}
	return out, nil
}

// PendingTransfers counts the voucher's transfer records.
func (g *Gate) PendingTransfers(ctx context.Context, id domain.VoucherID) (int, error) {
	k, err := g.Buckets(ctx, id)
	if err != nil {
		return 0, err
	}
	recs, err := g.records(ctx, id, k)
	n := 0
	for _, rs := range recs {
		n += len(rs)
	}
	return n, err
}

// Buyers is the union of every bucket's marks; a user has a mark only in
// its home bucket.
func (g *Gate) Buyers(ctx context.Context, id domain.VoucherID) (map[domain.UserID]domain.OrderID, error) {
	k, err := g.Buckets(ctx, id)
	if err != nil {
		return nil, err
	}
	out := map[domain.UserID]domain.OrderID{}
	for b := range k {
		raw, err := g.rdb.HGetAll(ctx, g.bucket(id, b, k).Buyers).Result()
		if err != nil {
			return nil, fmt.Errorf("buyers of voucher %d bucket %d: %w", id, b, err)
		}
		for u, o := range raw {
			if o == redisschema.ForfeitMark {
				continue // a cancelled order's buyer: no unit held
			}
			uid, err1 := strconv.ParseInt(u, 10, 64)
			oid, err2 := strconv.ParseInt(o, 10, 64)
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("buyers of voucher %d: bad mark %q=%q: %w", id, u, o, err)
			}
			out[domain.UserID(uid)] = domain.OrderID(oid)
		}
	}
	return out, nil
}

// Pending is the unfinished entries of every bucket's stream.
func (g *Gate) Pending(ctx context.Context, id domain.VoucherID) (int64, error) {
	k, err := g.Buckets(ctx, id)
	if err != nil {
		return 0, err
	}
	var n int64
	for b := range k {
		x, err := g.rdb.XLen(ctx, g.bucket(id, b, k).Orders).Result()
		if err != nil {
			return 0, fmt.Errorf("pending entries of voucher %d bucket %d: %w", id, b, err)
		}
		n += x
	}
	return n, nil
}

// Queued finds a queued order, split or not, with the cost of the unsplit
// gate's lookup (redisgate.Gate.Queued): one GET of the order's index entry,
// which names voucher, user and (for a split voucher) K, then one HGET of the
// mark in the voucher's buyers hash or the user's home bucket's. An unknown
// id and another user's id both stop after the GET, so neither answer nor
// cost tells them apart.
func (g *Gate) Queued(ctx context.Context, user domain.UserID, id domain.OrderID) (domain.VoucherOrder, bool, error) {
	raw, err := g.rdb.Get(ctx, redisschema.OrderIndexKey(g.prefix, id)).Result()
	if errors.Is(err, redis.Nil) {
		return domain.VoucherOrder{}, false, nil
	}
	if err != nil {
		return domain.VoucherOrder{}, false, fmt.Errorf("queued order %d: %w", id, err)
	}
	idx, ok := redisschema.DecodeOrderIndex(raw)
	if !ok || idx.User != user {
		return domain.VoucherOrder{}, false, nil
	}
	vid := idx.Voucher
	buyers := redisschema.KeysFor(g.prefix, vid).Buyers
	if idx.Buckets > 1 {
		buyers = g.bucket(vid, redisschema.HomeBucket(user, idx.Buckets), idx.Buckets).Buyers
	}
	mark, err := g.rdb.HGet(ctx, buyers, strconv.FormatInt(int64(user), 10)).Result()
	if errors.Is(err, redis.Nil) || (err == nil && mark != strconv.FormatInt(int64(id), 10)) {
		return domain.VoucherOrder{}, false, nil
	}
	if err != nil {
		return domain.VoucherOrder{}, false, fmt.Errorf("queued order %d: %w", id, err)
	}
	o, err := domain.NewVoucherOrder(id, user, vid)
	return o, err == nil, err
}

// Release undoes exactly this order's reservation in its home bucket.
func (g *Gate) Release(ctx context.Context, o domain.VoucherOrder, restoreStock bool) error {
	r := "0"
	if restoreStock {
		r = "1"
	}
	if err := g.release(ctx, o, r, "0"); err != nil {
		return fmt.Errorf("release %s: %w", o, err)
	}
	return nil
}

// release runs release.lua for o in its home bucket of a split voucher;
// forfeit '1' leaves the buyer marked with the forfeit mark.
func (g *Gate) release(ctx context.Context, o domain.VoucherOrder, restoreStock, forfeit string) error {
	k, err := g.Buckets(ctx, o.VoucherID())
	if err != nil || k < 2 {
		return err
	}
	home := g.bucket(o.VoucherID(), redisschema.HomeBucket(o.UserID(), k), k)
	return g.scripts.Run(ctx, g.rdb, releaseScript, []string{home.Voucher, home.Buyers}, int64(o.UserID()), int64(o.ID()), restoreStock, forfeit).Err()
}

// ReturnOrder gives back the unit of a cancelled order of a split voucher in
// its home bucket: its buyer's place is freed (Options.ReclaimAfterCancel)
// or forfeited. The forfeit mark no longer names the order, so a second
// return gives nothing.
func (g *Gate) ReturnOrder(ctx context.Context, o domain.VoucherOrder) error {
	forfeit := "1"
	if g.opts.ReclaimAfterCancel {
		forfeit = "0"
	}
	if err := g.release(ctx, o, "1", forfeit); err != nil {
		return fmt.Errorf("return %s: %w", o, err)
	}
	return nil
}

// StreamOrders reads the orders of a split voucher's k bucket streams, at
// most max entries in all (reconcile's in-flight check); complete is false
// when the streams hold more than that. Undecodable entries are skipped.
func (g *Gate) StreamOrders(ctx context.Context, id domain.VoucherID, k, max int) ([]domain.VoucherOrder, bool, error) {
	var out []domain.VoucherOrder
	left := max
	for b := range k {
		msgs, err := g.rdb.XRangeN(ctx, g.bucket(id, b, k).Orders, "-", "+", int64(left+1)).Result()
		if err != nil {
			return nil, false, fmt.Errorf("orders in voucher %d bucket %d: %w", id, b, err)
		}
		if len(msgs) > left {
			return out, false, nil
		}
		left -= len(msgs)
		for _, m := range msgs {
			if o, err := redisschema.DecodeOrder(id, m); err == nil {
				out = append(out, o)
			}
		}
	}
	return out, true, nil
}

// addedArg is what bucket b's hash records of the units admins added: bucket
// 0 keeps the total (Gate.Apply), the others none.
func addedArg(s domain.Sale, b int) string {
	if b != 0 {
		return ""
	}
	return strconv.Itoa(s.Added())
}
