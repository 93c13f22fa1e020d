package redisgate_test

import (
	"testing"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The heal of a gate behind the database covers unsplit vouchers only: the
// router counts them as the unsplit gate does, leaves split ones out (their
// buyers and units are spread over buckets and transfer records), and
// refuses to heal a split one rather than write a mark and a unit into one
// bucket without the others.
func TestRouterHealsUnsplitVouchersOnly(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	prefix := testenv.KeyPrefix(t)
	r := redisgate.New(rdb, fastOpts(prefix))
	whole := newVoucher(t, 5)
	split, err := newVoucher(t, 6).WithBuckets(3)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []domain.Voucher{whole, split} {
		if err := r.Preheat(ctx(t), v); err != nil {
			t.Fatal(err)
		}
	}
	counts, err := r.Counts(ctx(t), []domain.VoucherID{whole.ID(), split.ID()})
	if err != nil || len(counts) != 1 || counts[whole.ID()] != (ports.GateCount{Stock: 5}) {
		t.Fatalf("counts %v, %v; want the unsplit voucher's only", counts, err)
	}
	o := testenv.Order(t, 11, 1, whole.ID())
	if h, err := r.Heal(ctx(t), whole, []domain.VoucherOrder{o}); err != nil || h != (ports.Healed{Restored: 1, Retaken: 1}) {
		t.Fatalf("heal of the unsplit voucher: %+v, %v", h, err)
	}
	if _, err := r.Heal(ctx(t), split, []domain.VoucherOrder{testenv.Order(t, 12, 1, split.ID())}); err == nil {
		t.Fatal("heal of a split voucher answered as if it had healed")
	}
	if b, err := r.Buyers(ctx(t), split.ID()); err != nil || len(b) != 0 {
		t.Fatalf("split voucher's buyers %v, %v; want none written", b, err)
	}
}
