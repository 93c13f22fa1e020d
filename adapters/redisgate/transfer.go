package redisgate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// The transfer protocol moves units from donor d to home h (other slots) in
// three steps, each atomic in its own slot:
//
//	1. take  (d's slot): d.stock -= n; d.xfer[id] = "n:h:created"
//	2. apply (h's slot): if id not in h.applied { h.applied += id; h.stock += n }
//	3. settle (d's slot): del d.xfer[id]
//
// A unit is always in one place: a bucket's stock (or sold from it), or a record
// not yet in its home's applied set. Step 2 is idempotent, so the repair finishes
// records older than ApplyDeadline+Skew; the claim path applies only within
// ApplyDeadline of step 1 (apply.lua checks), which lets a restore fence it off.

// claimWithTransfers is a claim whose home h was empty: it moves half of each
// donor's stock home in turn and claims there again. Sold out only after a sweep
// saw every donor empty, nothing in flight, and a snapshot agreed; else busy.
func (g *Gate) claimWithTransfers(ctx context.Context, o domain.VoucherOrder, l *layout, h int) error {
	for sweep := range sweeps {
		if sweep > 0 { // another claim's transfer may have refilled the home
			if done, err := g.claimHome(ctx, l, h, o, false); done {
				return err
			}
		}
		inFlight, took := int64(0), false
		for i := 1; i < l.k; i++ {
			n, young, err := g.transfer(ctx, l, (h+i)%l.k, h)
			if err != nil { // step 1 may have run: its record is the repair's to finish
				return fmt.Errorf("%w: %w", ports.ErrNotAdmitted, err)
			}
			inFlight += young
			if n == 0 {
				continue
			}
			took = true
			if done, err := g.claimHome(ctx, l, h, o, false); done {
				return err
			}
		}
		if done, err := g.claimHome(ctx, l, h, o, false); done {
			return err
		}
		if took || inFlight > 0 {
			continue
		}
		// Units may have moved behind the sweep: one snapshot settles it.
		stock, records, err := g.snapshot(ctx, l)
		if err != nil {
			return fmt.Errorf("%w: %w", ports.ErrNotAdmitted, err)
		}
		if stock == 0 && records == 0 {
			return domain.ErrSoldOut
		}
		if stock == 0 { // only records whose claimant stopped are left: finish them
			_, _ = g.RepairTransfers(ctx, o.VoucherID())
		}
	}
	return fmt.Errorf("%w: voucher %d's stock is moving between buckets", ports.ErrNotAdmitted, o.VoucherID())
}

// transfer moves half of donor d's stock into bucket h (steps 1 to 3). n is
// the units taken; when 0, young counts d's records still in flight.
func (g *Gate) transfer(ctx context.Context, l *layout, d, h int) (n, young int64, err error) {
	id := randomToken()
	n, created, young, err := g.take(ctx, l.buckets[d], id, h)
	if err != nil {
		return 0, 0, fmt.Errorf("transfer from bucket %d: %w", d, err)
	}
	if n == 0 {
		return 0, young, nil
	}
	if err := g.opts.Fault("taken"); err != nil {
		return n, 0, err
	}
	res, err := g.apply(ctx, l.buckets[h], id, n, created, g.opts.ApplyDeadline, false)
	if err != nil {
		return n, 0, fmt.Errorf("transfer to bucket %d: %w", h, err)
	}
	if res == 1 || res == 0 {
		if err := g.opts.Fault("applied"); err != nil {
			return n, 0, err
		}
		// A failed settle leaves an applied record: the repair deletes it.
		_ = g.rdb.HDel(ctx, l.buckets[d].Transfers(), id).Err()
	}
	return n, 0, nil
}

// pull transfers units into bucket h until it holds want or a sweep moved none.
func (g *Gate) pull(ctx context.Context, l *layout, h int, want int64) error {
	for range sweeps {
		have, err := g.rdb.HGet(ctx, l.buckets[h].Voucher, "stock").Int64()
		if errors.Is(err, redis.Nil) {
			return nil // no home: heal.lua finds it gone and Restore rebuilds it
		}
		if err != nil || have >= want {
			return err
		}
		moved := false
		for i := 1; i < l.k && have < want; i++ {
			n, _, err := g.transfer(ctx, l, (h+i)%l.k, h)
			if err != nil {
				return err
			}
			moved = moved || n > 0
			have += n
		}
		if !moved {
			return nil
		}
	}
	return nil
}

// take is step 1 on the donor. With WaitReplicas its replicas confirm it like a
// claim's, else a failover to a replica that missed it would give its units back
// while the home keeps them; unconfirmed, it stops before the apply.
func (g *Gate) take(ctx context.Context, donor redisschema.Keys, id string, to int) (n int64, created int64, young int64, err error) {
	keys, deadline := []string{donor.Voucher, donor.Transfers()}, g.opts.ApplyDeadline.Milliseconds()
	var run *redis.Cmd
	var wait *redis.IntCmd
	if g.opts.WaitReplicas > 0 {
		run = redis.NewCmd(ctx, "evalsha", takeScript.Hash(), len(keys), keys[0], keys[1], id, to, deadline)
		if run, wait, err = g.runReplicated(ctx, donor.Voucher, takeScript, run); err != nil {
			return 0, 0, 0, err
		}
	} else {
		run = g.scripts.Run(ctx, g.rdb, takeScript, keys, id, to, deadline)
	}
	r, err := run.Int64Slice()
	if err != nil {
		return 0, 0, 0, err
	}
	if len(r) != 3 {
		return 0, 0, 0, fmt.Errorf("take script answered %v", r)
	}
	if wait != nil && r[0] > 0 {
		if err := redisx.Replicated(wait, g.opts.WaitReplicas, g.opts.WaitTimeout); err != nil {
			return 0, 0, 0, fmt.Errorf("take: %w", err)
		}
	}
	return r[0], r[1], r[2], nil
}

// apply is step 2 on the home (see apply.lua for the answers).
func (g *Gate) apply(ctx context.Context, home redisschema.Keys, id string, n, created int64, deadline time.Duration, force bool) (int64, error) {
	return g.scripts.Run(ctx, g.rdb, applyScript, []string{home.Voucher, home.Applied()},
		id, n, created, deadline.Milliseconds(), boolArg(force)).Int64()
}

// record is one transfer record, of donor bucket from.
type record struct {
	id       string
	n        int64
	from, to int
	created  int64
}

func parseRecord(id, raw string) (record, bool) {
	parts := strings.Split(raw, ":")
	if len(parts) != 3 {
		return record{}, false
	}
	n, err1 := strconv.ParseInt(parts[0], 10, 64)
	to, err2 := strconv.Atoi(parts[1])
	c, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || n <= 0 || to < 0 {
		return record{}, false
	}
	return record{id: id, n: n, to: to, created: c}, true
}

func (g *Gate) records(ctx context.Context, l *layout) ([]record, error) {
	var out []record
	for d, bk := range l.buckets {
		raw, err := g.rdb.HGetAll(ctx, bk.Transfers()).Result()
		if err != nil {
			return nil, fmt.Errorf("transfer records of voucher %d bucket %d: %w", l.id, d, err)
		}
		for rid, v := range raw {
			r, ok := parseRecord(rid, v)
			if !ok || r.to >= l.k {
				return nil, fmt.Errorf("voucher %d bucket %d: bad transfer record %q=%q", l.id, d, rid, v)
			}
			r.from = d
			out = append(out, r)
		}
	}
	return out, nil
}

// RepairTransfers finishes the voucher's transfer records older than ApplyDeadline+Skew and returns how many.
func (g *Gate) RepairTransfers(ctx context.Context, id domain.VoucherID) (int, error) {
	l, err := g.layoutOf(ctx, id)
	if err != nil || l.k < 2 {
		return 0, err
	}
	return g.finish(ctx, l, time.Now().Add(-g.opts.ApplyDeadline-g.opts.Skew).UnixMilli(), false)
}

// finish applies each record created at or before cutoff to its home, then deletes
// it; one whose home is missing or frozen is left for the restore, unless force.
func (g *Gate) finish(ctx context.Context, l *layout, cutoff int64, force bool) (int, error) {
	recs, err := g.records(ctx, l)
	if err != nil {
		return 0, err
	}
	done := 0
	for _, r := range recs {
		if r.created > cutoff {
			continue // its claimant may still apply it
		}
		res, err := g.apply(ctx, l.buckets[r.to], r.id, r.n, r.created, 0, force)
		if err != nil {
			return done, fmt.Errorf("finish transfer %s of voucher %d: %w", r.id, l.id, err)
		}
		if !force && res != 0 && res != 1 {
			continue
		}
		if err := g.rdb.HDel(ctx, l.buckets[r.from].Transfers(), r.id).Err(); err != nil {
			return done, fmt.Errorf("finish transfer %s of voucher %d: %w", r.id, l.id, err)
		}
		done++
	}
	return done, nil
}

// RepairAll runs RepairTransfers on every split voucher in the live set.
func (g *Gate) RepairAll(ctx context.Context) (int, error) {
	members, err := g.rdb.SMembers(ctx, redisschema.LiveSet(g.prefix)).Result()
	if err != nil {
		return 0, fmt.Errorf("repair transfers: %w", err)
	}
	seen := map[domain.VoucherID]bool{}
	total := 0
	for _, m := range members {
		if !strings.Contains(m, ".") {
			continue
		}
		id, ok := redisschema.ParseTag(m)
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		n, err := g.RepairTransfers(ctx, id)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// snapshot reads every bucket's stock and record count in one pipelined round trip.
func (g *Gate) snapshot(ctx context.Context, l *layout) (stock, records int64, err error) {
	pipe := g.rdb.Pipeline()
	stocks := make([]*redis.StringCmd, l.k)
	recs := make([]*redis.IntCmd, l.k)
	for b, bk := range l.buckets {
		stocks[b] = pipe.HGet(ctx, bk.Voucher, "stock")
		recs[b] = pipe.HLen(ctx, bk.Transfers())
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, fmt.Errorf("snapshot of voucher %d's buckets: %w", l.id, err)
	}
	for b := range l.k {
		if n, err := stocks[b].Int64(); err == nil && n > 0 {
			stock += n
		}
		records += recs[b].Val()
	}
	return stock, records, nil
}

func (g *Gate) bucket(id domain.VoucherID, b, k int) redisschema.Keys {
	return redisschema.KeysForTag(g.prefix, redisschema.BucketTag(id, b, k))
}

// split is bucket b's share of n units: as even as integers allow.
func split(n, b, k int) int {
	s := n / k
	if b < n%k {
		s++
	}
	return s
}

func (g *Gate) setMeta(ctx context.Context, v domain.Voucher, k int) error {
	key := redisschema.BucketMeta(g.prefix, v.ID())
	ok, err := g.rdb.SetNX(ctx, key, k, 0).Result()
	if err != nil {
		return err
	}
	if !ok {
		cur, err := g.rdb.Get(ctx, key).Int()
		if err != nil {
			return err
		}
		if cur != k {
			return fmt.Errorf("voucher %d is split into %d buckets in Redis, not %d", v.ID(), cur, k)
		}
	}
	if err := g.rdb.PExpireAt(ctx, key, g.expireAt(v.Sale())).Err(); err != nil {
		return err
	}
	g.known(v.ID(), k)
	return nil
}

// preheatSplit writes each absent bucket with its share of the stock.
func (g *Gate) preheatSplit(ctx context.Context, v domain.Voucher, l *layout) error {
	s := v.Sale()
	for b, bk := range l.buckets {
		code, err := g.write(ctx, s, bk, b, bk.Staging("none"), split(s.Stock(), b, l.k), 0, "preheat")
		if err != nil {
			return fmt.Errorf("preheat voucher %d bucket %d: %w", v.ID(), b, err)
		}
		if code == -2 {
			return anotherSale(v.ID())
		}
	}
	return nil
}

// claimHome claims o in its home bucket h; done is false while h is empty.
func (g *Gate) claimHome(ctx context.Context, l *layout, h int, o domain.VoucherOrder, index bool) (done bool, err error) {
	answer, err := g.claimIn(ctx, l, h, o, true, index)
	if err != nil {
		return true, fmt.Errorf("%w (outcome unknown: if the script ran, the order is fulfilled)", err)
	}
	if answer == "empty" {
		return false, nil
	}
	return true, answerErr(answer, o)
}
