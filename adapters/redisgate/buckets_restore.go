package redisgate

import (
	"context"
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
	cmds := stateCmds(ctx, pipe, g.newLayout(id, k))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("buckets of voucher %d: %w", id, err)
	}
	return parseStates(id, cmds)
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

// restoreSplit rebuilds the buckets Redis lost from the database, leaving the ones
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
func (g *Gate) restoreSplit(ctx context.Context, v domain.Voucher, l *layout, buyers []domain.VoucherOrder, force bool) (bool, error) {
	k := l.k
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
		return false, g.addLive(ctx, l)
	}
	// Once buckets are frozen, stopping half way leaves the sale answering
	// busy until the next repair: the restore runs to its end on its own
	// deadline, whatever the caller's (the periodic repair's may be shorter
	// than the fence).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.restoreBudget())
	defer cancel()
	lock := redisschema.BucketLock(g.prefix, id)
	token := randomToken()
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
	if err := g.addLive(ctx, l); err != nil {
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
	marks, err := domain.BuyerMarks(id, v.Sale().LimitPerUser(), buyers)
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
		home := map[domain.UserID][]domain.OrderID{}
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

func (g *Gate) writeRestored(ctx context.Context, v domain.Voucher, k, b, stock int, marks map[domain.UserID][]domain.OrderID) error {
	bk := g.bucket(v.ID(), b, k)
	staging := bk.Staging(randomToken())
	staged, err := g.stage(ctx, staging, marks)
	if err != nil {
		return fmt.Errorf("restore voucher %d bucket %d: stage buyers: %w", v.ID(), b, err)
	}
	s := v.Sale()
	code, err := g.scripts.Run(ctx, g.rdb, writeScript, []string{bk.Voucher, bk.Buyers, staging},
		stock, s.Begin().UnixMilli(), s.End().UnixMilli(), g.expireAt(s).UnixMilli(), staged, "restore",
		redisschema.Paused(s), addedArg(s, b), s.LimitPerUser()).Int()
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
