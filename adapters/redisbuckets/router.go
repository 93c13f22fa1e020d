package redisbuckets

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Whole is the unsplit gate (redisgate.Gate): what every K = 1 call goes to,
// unchanged.
type Whole interface {
	ports.StockGate
	ports.GateProbe
	ports.GateAudit
	ports.GateControls
}

// Router is the gate the service sees: each call goes to the unsplit gate or
// to the split one by the voucher's K. K comes from the voucher where the
// call carries it (Preheat, Restore, Overwrite: read from MySQL), and
// otherwise from Redis (the K key beside the buckets), cached for good once
// it is > 1. K = 1 calls cost nothing more than before, except the ones
// named below.
type Router struct {
	whole   Whole
	split   *Gate
	streams bool
}

var (
	_ ports.StockGate = (*Router)(nil)
	_ ports.GateProbe = (*Router)(nil)
	_ ports.GateAudit = (*Router)(nil)
)

// NewRouter: streams tells whether the service runs the Stream queue. Split
// vouchers need it (each bucket's script appends to the bucket's stream); on
// the channel queue a voucher created with K > 1 is sold unsplit: K is a
// capacity choice, every guarantee is the same either way.
func NewRouter(whole Whole, split *Gate, streams bool) *Router {
	if whole == nil || split == nil {
		panic("redisbuckets: NewRouter needs both gates")
	}
	return &Router{whole: whole, split: split, streams: streams}
}

func (r *Router) Preheat(ctx context.Context, v domain.Voucher) error {
	if k := v.Sale().Buckets(); k > 1 && r.streams {
		return r.split.Preheat(ctx, v, k)
	}
	return r.whole.Preheat(ctx, v)
}

func (r *Router) Restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) (bool, error) {
	if k := v.Sale().Buckets(); k > 1 && r.streams {
		return r.split.Restore(ctx, v, k, buyers)
	}
	return r.whole.Restore(ctx, v, buyers)
}

// Reserve is the channel driver's: split vouchers are never preheated there,
// so it is the unsplit gate's.
func (r *Router) Reserve(ctx context.Context, o domain.VoucherOrder) error {
	return r.whole.Reserve(ctx, o)
}

// Release costs a K lookup (one GET, unless cached) on top of the unsplit
// gate's script: releases are the rare failure path.
func (r *Router) Release(ctx context.Context, o domain.VoucherOrder, restoreStock bool) error {
	k, err := r.split.Buckets(ctx, o.VoucherID())
	if err != nil {
		return err
	}
	if k > 1 {
		return r.split.Release(ctx, o, restoreStock)
	}
	return r.whole.Release(ctx, o, restoreStock)
}

// Return sends the unsplit vouchers' orders to the unsplit gate in one
// batch, and releases each split voucher's order in its home bucket (split
// vouchers are never healed, so they need no returned set), after one
// pipelined K lookup for the batch's vouchers.
func (r *Router) Return(ctx context.Context, orders []domain.VoucherOrder) error {
	ids := make([]domain.VoucherID, 0, len(orders))
	seen := map[domain.VoucherID]bool{}
	for _, o := range orders {
		if !seen[o.VoucherID()] {
			seen[o.VoucherID()] = true
			ids = append(ids, o.VoucherID())
		}
	}
	_, split, err := r.kinds(ctx, ids)
	if err != nil {
		return err
	}
	isSplit := make(map[domain.VoucherID]bool, len(split))
	for _, s := range split {
		isSplit[s.id] = true
	}
	whole := make([]domain.VoucherOrder, 0, len(orders))
	for _, o := range orders {
		if !isSplit[o.VoucherID()] {
			whole = append(whole, o)
			continue
		}
		if err := r.split.ReturnOrder(ctx, o); err != nil {
			return err
		}
	}
	if len(whole) == 0 {
		return nil
	}
	return r.whole.Return(ctx, whole)
}

// Queued reads the order index once for either kind of voucher (see
// Gate.Queued): its cost is the unsplit gate's, for both.
func (r *Router) Queued(ctx context.Context, user domain.UserID, id domain.OrderID) (domain.VoucherOrder, bool, error) {
	return r.split.Queued(ctx, user, id)
}

// Missing reads every voucher's K in one pipelined round trip more (kinds),
// then probes the unsplit ones as before and each split one bucket by bucket.
func (r *Router) Missing(ctx context.Context, ids []domain.VoucherID) ([]domain.VoucherID, error) {
	whole, split, err := r.kinds(ctx, ids)
	if err != nil {
		return nil, err
	}
	var missing []domain.VoucherID
	for _, s := range split {
		gone, err := r.split.Missing(ctx, s.id, s.k)
		if err != nil {
			return nil, err
		}
		if gone {
			missing = append(missing, s.id)
		}
	}
	w, err := r.whole.Missing(ctx, whole)
	if err != nil {
		return nil, err
	}
	return append(missing, w...), nil
}

// Counts reports the unsplit vouchers only: a split voucher keeps its
// buyers and units spread over its buckets (and units in transfer records),
// and Heal does not repair it yet, so it is left out as if the gate did not
// hold it. Its K costs one pipelined round trip more, as in Missing.
func (r *Router) Counts(ctx context.Context, ids []domain.VoucherID) (map[domain.VoucherID]ports.GateCount, error) {
	whole, _, err := r.kinds(ctx, ids)
	if err != nil {
		return nil, err
	}
	return r.whole.Counts(ctx, whole)
}

// errHealSplit: Counts never reports a split voucher, so nothing should ask.
var errHealSplit = errors.New("healing a split voucher's buckets is not supported")

func (r *Router) Heal(ctx context.Context, v domain.Voucher, orders []domain.VoucherOrder) (ports.Healed, error) {
	if k := v.Sale().Buckets(); k > 1 && r.streams {
		return ports.Healed{}, fmt.Errorf("heal voucher %d: %w", v.ID(), errHealSplit)
	}
	return r.whole.Heal(ctx, v, orders)
}

type splitVoucher struct {
	id domain.VoucherID
	k  int
}

// kinds reads every voucher's K in one pipelined round trip. A split voucher
// whose K key was lost counts as unsplit: it is then reported missing, and
// its Restore (K from MySQL) writes the key again.
func (r *Router) kinds(ctx context.Context, ids []domain.VoucherID) ([]domain.VoucherID, []splitVoucher, error) {
	if len(ids) == 0 {
		return nil, nil, nil
	}
	pipe := r.split.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.Get(ctx, redisschema.BucketMeta(r.split.prefix, id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("probe %d vouchers' buckets: %w", len(ids), err)
	}
	var whole []domain.VoucherID
	var split []splitVoucher
	for i, id := range ids {
		if k, err := cmds[i].Int(); err == nil && k >= 2 {
			split = append(split, splitVoucher{id, k})
		} else {
			whole = append(whole, id)
		}
	}
	return whole, split, nil
}

func (r *Router) Stock(ctx context.Context, id domain.VoucherID) (int, bool, error) {
	k, err := r.split.Buckets(ctx, id)
	if err != nil {
		return 0, false, err
	}
	if k > 1 {
		return r.split.Stock(ctx, id)
	}
	return r.whole.Stock(ctx, id)
}

func (r *Router) Buyers(ctx context.Context, id domain.VoucherID) (map[domain.UserID]domain.OrderID, error) {
	k, err := r.split.Buckets(ctx, id)
	if err != nil {
		return nil, err
	}
	if k > 1 {
		return r.split.Buyers(ctx, id)
	}
	return r.whole.Buyers(ctx, id)
}

func (r *Router) Overwrite(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) error {
	if k := v.Sale().Buckets(); k > 1 && r.streams {
		return r.split.Overwrite(ctx, v, k, buyers)
	}
	return r.whole.Overwrite(ctx, v, buyers)
}

// Backlog is the stream queue's backlog with the split vouchers' bucket
// streams added: what reconcile must wait for.
type Backlog struct {
	whole ports.QueueBacklog
	split *Gate
}

var _ ports.QueueBacklog = (*Backlog)(nil)

func NewBacklog(whole ports.QueueBacklog, split *Gate) *Backlog {
	return &Backlog{whole: whole, split: split}
}

func (b *Backlog) Pending(ctx context.Context, id domain.VoucherID) (int64, error) {
	k, err := b.split.Buckets(ctx, id)
	if err != nil {
		return 0, err
	}
	if k > 1 {
		return b.split.Pending(ctx, id)
	}
	return b.whole.Pending(ctx, id)
}

// Orders lists a split voucher's queued orders across its bucket streams, at
// most max entries in all; an unsplit voucher's come from the stream queue.
func (b *Backlog) Orders(ctx context.Context, id domain.VoucherID, max int) ([]domain.VoucherOrder, bool, error) {
	k, err := b.split.Buckets(ctx, id)
	if err != nil {
		return nil, false, err
	}
	if k <= 1 {
		return b.whole.Orders(ctx, id, max)
	}
	return b.split.StreamOrders(ctx, id, k, max)
}

// Admission is the Stream driver's admission in front of both gates. A
// voucher this process knows to be split goes straight to its buckets; any
// other claim goes to the unsplit admission, unchanged, and only when that
// answers not found is the voucher's K read from Redis (once per process
// per split voucher, since it is then cached), so K = 1 claims cost exactly
// what they did.
type Admission struct {
	whole ports.Admission
	split *Gate
}

var _ ports.Admission = (*Admission)(nil)

func NewAdmission(whole ports.Admission, split *Gate) *Admission {
	if whole == nil || split == nil {
		panic("redisbuckets: NewAdmission needs both admissions")
	}
	return &Admission{whole: whole, split: split}
}

func (a *Admission) Admit(ctx context.Context, o domain.VoucherOrder) error {
	if a.split.cached(o.VoucherID()) > 1 {
		return a.split.Admit(ctx, o)
	}
	err := a.whole.Admit(ctx, o)
	if !errors.Is(err, domain.ErrVoucherNotFound) {
		return err
	}
	k, kerr := a.split.Buckets(ctx, o.VoucherID())
	if kerr != nil || k < 2 {
		return err
	}
	return a.split.Admit(ctx, o)
}
