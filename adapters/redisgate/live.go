package redisgate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// The live set, and what reconcile, the probe and the repair do to a gate.

// addLive names every bucket's tag in the live set, where the stream consumers look.
func (g *Gate) addLive(ctx context.Context, l *layout) error {
	members := make([]any, l.k)
	for b := range l.k {
		members[b] = redisschema.BucketTag(l.id, b, l.k)
	}
	if err := g.rdb.SAdd(ctx, redisschema.LiveSet(g.prefix), members...).Err(); err != nil {
		return fmt.Errorf("add voucher %d to the live set: %w", l.id, err)
	}
	return nil
}

// Missing reports the vouchers with a bucket missing, left frozen by a dead
// restore, or absent from the live set, in two pipelined round trips.
func (g *Gate) Missing(ctx context.Context, ids []domain.VoucherID) ([]domain.VoucherID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ls, err := g.kinds(ctx, ids)
	if err != nil {
		return nil, err
	}
	live := redisschema.LiveSet(g.prefix)
	pipe := g.rdb.Pipeline()
	states := make([][]*redis.SliceCmd, len(ls))
	members := make([][]*redis.BoolCmd, len(ls))
	for i, l := range ls {
		states[i] = stateCmds(ctx, pipe, l)
		for b := range l.k {
			members[i] = append(members[i], pipe.SIsMember(ctx, live, redisschema.BucketTag(l.id, b, l.k)))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("probe %d vouchers: %w", len(ids), err)
	}
	var missing []domain.VoucherID
	for i, l := range ls {
		st, err := parseStates(l.id, states[i])
		gone := err != nil || !allServing(st)
		for _, m := range members[i] {
			gone = gone || !m.Val()
		}
		if gone {
			missing = append(missing, l.id)
		}
	}
	return missing, nil
}

// Queued costs at most two commands: the order's index entry, then its home
// bucket's buyers. An unknown ID and another user's both stop after the first,
// so even timing cannot tell them apart.
func (g *Gate) Queued(ctx context.Context, user domain.UserID, id domain.OrderID) (domain.VoucherOrder, bool, error) {
	return g.queued(ctx, id, func(u domain.UserID) bool { return u == user })
}

// QueuedByID is Queued for whoever claimed the order (ports.OrderIndex).
func (g *Gate) QueuedByID(ctx context.Context, id domain.OrderID) (domain.VoucherOrder, bool, error) {
	return g.queued(ctx, id, func(domain.UserID) bool { return true })
}

// queued reads the order's index entry and, when mine accepts its user, whether
// that user's places hold the order (a refused claim's entry they do not).
func (g *Gate) queued(ctx context.Context, id domain.OrderID, mine func(domain.UserID) bool) (domain.VoucherOrder, bool, error) {
	raw, err := g.rdb.Get(ctx, redisschema.OrderIndexKey(g.prefix, id)).Result()
	if errors.Is(err, redis.Nil) {
		return domain.VoucherOrder{}, false, nil
	}
	if err != nil {
		return domain.VoucherOrder{}, false, fmt.Errorf("queued order %d: %w", id, err)
	}
	idx, ok := redisschema.DecodeOrderIndex(raw)
	if !ok || !mine(idx.User) {
		return domain.VoucherOrder{}, false, nil
	}
	user, vid := idx.User, idx.Voucher
	buyers := g.bucket(vid, redisschema.HomeBucket(user, idx.Buckets), max(idx.Buckets, 1)).Buyers
	// Every place the user may hold: a sale's limit is not in the index.
	fields := make([]string, domain.MaxLimitPerUser)
	for n := range fields {
		fields[n] = redisschema.PlaceField(user, n+1)
	}
	marks, err := g.rdb.HMGet(ctx, buyers, fields...).Result()
	if err != nil {
		return domain.VoucherOrder{}, false, fmt.Errorf("queued order %d: voucher %d: %w", id, vid, err)
	}
	if !slices.Contains(marks, any(strconv.FormatInt(int64(id), 10))) {
		return domain.VoucherOrder{}, false, nil
	}
	o, err := domain.NewVoucherOrder(id, user, vid)
	if err != nil {
		return domain.VoucherOrder{}, false, fmt.Errorf("queued order %d: %w", id, err)
	}
	return o, true, nil
}

// PruneLive removes from the live set the members whose keys have all
// expired, so it does not grow with every sale ever made, and reports how many.
func (g *Gate) PruneLive(ctx context.Context) (int, error) {
	live := redisschema.LiveSet(g.prefix)
	members, err := g.rdb.SMembers(ctx, live).Result()
	if err != nil {
		return 0, fmt.Errorf("prune live set: %w", err)
	}
	var tags []any
	for _, m := range members {
		if _, ok := redisschema.ParseTag(m); ok {
			tags = append(tags, m)
		}
	}
	stale, err := g.tagsWhere(ctx, tags, false)
	if err != nil || len(stale) == 0 {
		return 0, err
	}
	// The set is another slot than the keys: remove, then check again, so a
	// Preheat or Restore meanwhile, which SADDs after writing its hash, is put back.
	err = g.rdb.SRem(ctx, live, stale...).Err()
	if err == nil {
		var back []any
		if back, err = g.tagsWhere(ctx, stale, true); err == nil && len(back) > 0 {
			err = g.rdb.SAdd(ctx, live, back...).Err()
		}
	}
	if err != nil {
		return 0, fmt.Errorf("prune live set: %w", err)
	}
	return len(stale), nil
}

// tagsWhere returns the tags whose bucket hash or order stream exists (alive),
// or whose both are gone (!alive).
func (g *Gate) tagsWhere(ctx context.Context, tags []any, alive bool) ([]any, error) {
	if len(tags) == 0 {
		return nil, nil
	}
	pipe := g.rdb.Pipeline()
	checks := make([]*redis.IntCmd, len(tags))
	for i, tag := range tags {
		k := redisschema.KeysForTag(g.prefix, tag.(string))
		checks[i] = pipe.Exists(ctx, k.Voucher, k.Orders)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("prune live set: %w", err)
	}
	var out []any
	for i, c := range checks {
		if (c.Val() > 0) == alive {
			out = append(out, tags[i])
		}
	}
	return out, nil
}

// Stock is the voucher's units in Redis: every bucket's stock plus the units
// of transfer records not yet applied; false when no bucket exists.
func (g *Gate) Stock(ctx context.Context, id domain.VoucherID) (int, bool, error) {
	l, err := g.layoutOf(ctx, id)
	if err != nil {
		return 0, false, err
	}
	st, err := g.states(ctx, l)
	if err != nil {
		return 0, false, err
	}
	found := false
	total := int64(0)
	for _, s := range st {
		found = found || s.exists
		total += s.stock
	}
	if l.k == 1 {
		return int(total), found, nil
	}
	recs, err := g.records(ctx, l)
	if err != nil {
		return 0, false, err
	}
	for _, r := range recs {
		applied, err := g.rdb.SIsMember(ctx, l.buckets[r.to].Applied(), r.id).Result()
		if err != nil {
			return 0, false, err
		}
		if !applied {
			total += r.n
		}
	}
	return int(total), found, nil
}

// Buyers returns the orders the voucher's places hold, with their users (it
// reads every buyers hash: for reconciliation and tests).
func (g *Gate) Buyers(ctx context.Context, id domain.VoucherID) (map[domain.OrderID]domain.UserID, error) {
	l, err := g.layoutOf(ctx, id)
	if err != nil {
		return nil, err
	}
	out := map[domain.OrderID]domain.UserID{}
	for b, bk := range l.buckets {
		raw, err := g.rdb.HGetAll(ctx, bk.Buyers).Result()
		if err != nil {
			return nil, fmt.Errorf("buyers of voucher %d bucket %d: %w", id, b, err)
		}
		for f, m := range raw {
			u, ok1 := redisschema.ParsePlaceField(f)
			oid, held, ok2 := redisschema.ParseMark(m)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("buyers of voucher %d: bad mark %q=%q", id, f, m)
			}
			if held { // a forfeited place holds no unit
				out[oid] = u
			}
		}
	}
	return out, nil
}

// Pending is the entries of every bucket's stream not yet trimmed.
func (g *Gate) Pending(ctx context.Context, id domain.VoucherID) (int64, error) {
	l, err := g.layoutOf(ctx, id)
	if err != nil {
		return 0, err
	}
	var n int64
	for b, bk := range l.buckets {
		x, err := g.rdb.XLen(ctx, bk.Orders).Result()
		if err != nil {
			return 0, fmt.Errorf("pending entries of voucher %d bucket %d: %w", id, b, err)
		}
		n += x
	}
	return n, nil
}

// Orders lists the orders the voucher's streams hold, oldest first per bucket,
// reading at most max entries outside the consumer group; false when there are more.
func (g *Gate) Orders(ctx context.Context, id domain.VoucherID, max int) ([]domain.VoucherOrder, bool, error) {
	l, err := g.layoutOf(ctx, id)
	if err != nil {
		return nil, false, err
	}
	var out []domain.VoucherOrder
	for b, bk := range l.buckets {
		orders, n, err := g.ordersIn(ctx, id, bk.Orders, max)
		if err != nil {
			return nil, false, fmt.Errorf("orders in voucher %d bucket %d: %w", id, b, err)
		}
		out = append(out, orders...)
		if n > max {
			return out, false, nil
		}
		max -= n
	}
	return out, true, nil
}

// ordersIn reads the orders of a stream's first max entries, a page at a time; n
// is the entries read, max+1 when more follow. An invalid entry counts, gives none.
func (g *Gate) ordersIn(ctx context.Context, id domain.VoucherID, stream string, max int) ([]domain.VoucherOrder, int, error) {
	var orders []domain.VoucherOrder
	n := 0
	for from := "-"; ; {
		want := min(restoreChunk-1, max-n) + 1 // one past max tells that more follow
		page, err := g.rdb.XRangeN(ctx, stream, from, "+", int64(want)).Result()
		if err != nil {
			return nil, n, err
		}
		for _, m := range page {
			if n == max {
				return orders, n + 1, nil
			}
			n++
			if o, err := redisschema.DecodeOrder(id, m); err == nil {
				orders = append(orders, o)
			}
		}
		if len(page) < want {
			return orders, n, nil
		}
		from = "(" + page[len(page)-1].ID
	}
}

// healChunk bounds one HMGET and one heal script, which holds Redis while it runs.
const healChunk = 500

// Counts costs two pipelined round trips: every voucher's K, then each bucket's
// buyers, stock and transfer records' units (which count as stock: one applied
// but not yet deleted counts twice for a moment, starting at worst an idle heal).
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

// Heal finds the orders their home bucket's places lack (pipelined HMGETs), then
// puts them back with heal.lua, which checks each place again. A split home short
// of units first pulls them from the others: oversold only when no bucket has one.
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

// lacks tells whether a user's places (as HMGET read them) hold neither o nor its forfeit, and one is free.
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

// returnChunk bounds one return script, which holds Redis while it runs.
const returnChunk = 500

// Return runs return.lua once per home bucket and chunk of orders; its returned
// set costs one member per cancelled order while the sale's keys live.
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
