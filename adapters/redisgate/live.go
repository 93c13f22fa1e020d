package redisgate

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// The live set, and what reconcile and the probe read of a voucher's gate.

func (g *Gate) addLive(ctx context.Context, k redisschema.Keys, id domain.VoucherID) error {
	if err := g.rdb.SAdd(ctx, k.Live, int64(id)).Err(); err != nil {
		return fmt.Errorf("add voucher %d to live set: %w", id, err)
	}
	return nil
}

var _ ports.GateProbe = (*Gate)(nil)

// Missing costs one pipelined round trip: an EXISTS of the voucher hash and a
// SISMEMBER of the live set per voucher. On a cluster go-redis splits the
// pipeline by node, still one round trip per master.
func (g *Gate) Missing(ctx context.Context, ids []domain.VoucherID) ([]domain.VoucherID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	live := redisschema.LiveSet(g.prefix)
	pipe := g.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(ids))
	member := make([]*redis.BoolCmd, len(ids))
	for i, id := range ids {
		exists[i] = pipe.Exists(ctx, g.keys(id).Voucher)
		member[i] = pipe.SIsMember(ctx, live, int64(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("probe %d vouchers: %w", len(ids), err)
	}
	var missing []domain.VoucherID
	for i, id := range ids {
		if exists[i].Val() == 0 || !member[i].Val() {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// Queued costs at most two commands whatever the number of live sales: the
// order's index entry names its voucher and user, and the voucher's buyers
// hash confirms the user still holds this order (a released or refused claim
// leaves an entry whose buyers do not). An unknown ID and another user's ID
// both stop after the first command, so neither the answer nor its timing
// tells them apart.
func (g *Gate) Queued(ctx context.Context, user domain.UserID, id domain.OrderID) (domain.VoucherOrder, bool, error) {
	raw, err := g.rdb.Get(ctx, redisschema.OrderIndexKey(g.prefix, id)).Result()
	if errors.Is(err, redis.Nil) {
		return domain.VoucherOrder{}, false, nil
	}
	if err != nil {
		return domain.VoucherOrder{}, false, fmt.Errorf("queued order %d: %w", id, err)
	}
	idx, ok := redisschema.DecodeOrderIndex(raw)
	if !ok || idx.User != user || idx.Buckets != 1 {
		return domain.VoucherOrder{}, false, nil
	}
	vid := idx.Voucher
	mark, err := g.rdb.HGet(ctx, g.keys(vid).Buyers, strconv.FormatInt(int64(user), 10)).Result()
	if errors.Is(err, redis.Nil) || (err == nil && mark != strconv.FormatInt(int64(id), 10)) {
		return domain.VoucherOrder{}, false, nil
	}
	if err != nil {
		return domain.VoucherOrder{}, false, fmt.Errorf("queued order %d: voucher %d: %w", id, vid, err)
	}
	o, err := domain.NewVoucherOrder(id, user, domain.VoucherID(vid))
	if err != nil {
		return domain.VoucherOrder{}, false, fmt.Errorf("queued order %d: %w", id, err)
	}
	return o, true, nil
}

// PruneLive removes from the live set the vouchers whose keys have all
// expired, and reports how many. The stream consumer discovers streams there,
// so the set must not grow with every sale ever made; the service runs this
// with its periodic gate check.
func (g *Gate) PruneLive(ctx context.Context) (int, error) {
	live := redisschema.LiveSet(g.prefix)
	members, err := g.rdb.SMembers(ctx, live).Result()
	if err != nil {
		return 0, fmt.Errorf("prune live set: %w", err)
	}
	vids := make([]domain.VoucherID, 0, len(members))
	checks := make([]*redis.IntCmd, 0, len(members))
	pipe := g.rdb.Pipeline()
	for _, m := range members {
		vid, err := strconv.ParseInt(m, 10, 64)
		if err != nil || vid <= 0 {
			continue
		}
		k := g.keys(domain.VoucherID(vid))
		vids = append(vids, domain.VoucherID(vid))
		checks = append(checks, pipe.Exists(ctx, k.Voucher, k.Orders))
	}
	if len(vids) == 0 {
		return 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("prune live set: %w", err)
	}
	var stale []domain.VoucherID
	for i, c := range checks {
		if c.Val() == 0 {
			stale = append(stale, vids[i])
		}
	}
	if len(stale) == 0 {
		return 0, nil
	}
	if err := g.prune(ctx, live, stale); err != nil {
		return 0, fmt.Errorf("prune live set: %w", err)
	}
	return len(stale), nil
}

// prune removes vouchers whose keys have all expired (their voucher hash and
// their order stream, which outlives the sale until its consumer is done).
// The set and the voucher keys live in different slots, so no script or MULTI
// can make "check, then remove" atomic. Instead it removes first and checks
// again: a Preheat or Restore that recreated the voucher meanwhile either
// finished its own SADD after our SREM, or wrote its voucher hash before our
// second check, which then puts the member back.
func (g *Gate) prune(ctx context.Context, live string, vids []domain.VoucherID) error {
	members := make([]any, len(vids))
	for i, v := range vids {
		members[i] = int64(v)
	}
	if err := g.rdb.SRem(ctx, live, members...).Err(); err != nil {
		return err
	}
	pipe := g.rdb.Pipeline()
	checks := make([]*redis.IntCmd, len(vids))
	for i, v := range vids {
		k := g.keys(v)
		checks[i] = pipe.Exists(ctx, k.Voucher, k.Orders)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	var back []any
	for i, c := range checks {
		if c.Val() > 0 {
			back = append(back, int64(vids[i]))
		}
	}
	if len(back) > 0 {
		return g.rdb.SAdd(ctx, live, back...).Err()
	}
	return nil
}

// Stock reports a voucher's remaining stock in the gate, and false when the
// gate does not hold the voucher. For reconciliation and tests.
func (g *Gate) Stock(ctx context.Context, id domain.VoucherID) (int, bool, error) {
	s, err := g.rdb.HGet(ctx, g.keys(id).Voucher, "stock").Int()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("stock of voucher %d: %w", id, err)
	}
	return s, true, nil
}

// Buyers returns every user marked as holding an order of the voucher, with
// that order's ID. For reconciliation and tests (it reads the whole hash).
func (g *Gate) Buyers(ctx context.Context, id domain.VoucherID) (map[domain.UserID]domain.OrderID, error) {
	raw, err := g.rdb.HGetAll(ctx, g.keys(id).Buyers).Result()
	if err != nil {
		return nil, fmt.Errorf("buyers of voucher %d: %w", id, err)
	}
	out := make(map[domain.UserID]domain.OrderID, len(raw))
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
	return out, nil
}
