package redisgate_test

import (
	"errors"
	"testing"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// A split voucher heals as an unsplit one does. One bucket's master fails
// over to a replica that lagged behind three claims (their marks gone, their
// units back in its stock), and three more buyers whose home is that bucket
// sell those units again. Once all six orders are in the database, Counts
// shows the gate behind it, and Heal puts the three marks back; their home
// bucket is empty, so the units are taken from the other buckets by
// transfers: nothing is counted oversold while units are left, and stock +
// holders = the initial stock again. Before the heal covered split vouchers,
// Counts left them out and Heal refused them.
func TestSplitVoucherHealsAfterABucketForgotClaims(t *testing.T) {
	g, rdb, prefix := clusterGate(t)
	v := splitInto(t, newVoucher(t, 9), 3) // 3, 3, 3
	if err := g.Preheat(ctx(t), v); err != nil {
		t.Fatal(err)
	}
	var committed []domain.VoucherOrder
	claimIn1 := func(from domain.UserID) {
		u := from
		for range 3 {
			u = userIn(1, 3, u+1)
			o := orderFor(t, u, v.ID())
			if err := g.ReserveAndAppend(ctx(t), o); err != nil {
				t.Fatalf("claim of user %d: %v", u, err)
			}
			committed = append(committed, o)
		}
	}
	claimIn1(0)
	forgotten := append([]domain.VoucherOrder(nil), committed...)
	// The failover: bucket 1 forgets the three claims.
	bk := redisschema.KeysForTag(prefix, redisschema.BucketTag(v.ID(), 1, 3))
	if err := rdb.Del(ctx(t), bk.Buyers).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HIncrBy(ctx(t), bk.Voucher, "stock", 3).Err(); err != nil {
		t.Fatal(err)
	}
	claimIn1(1000) // sold again
	if s, err := g.Stocks(ctx(t), v.ID()); err != nil || s[1] != 0 {
		t.Fatalf("bucket stocks %v, %v; want bucket 1 empty", s, err)
	}

	counts, err := g.Counts(ctx(t), []domain.VoucherID{v.ID()})
	if want := (ports.GateCount{Buyers: 3, Stock: 6}); err != nil || counts[v.ID()] != want {
		t.Fatalf("counts %v, %v; want %+v (3 marks for the database's 6 orders: behind it)", counts, err, want)
	}
	h, err := g.Heal(ctx(t), v, committed)
	if want := (ports.Healed{Restored: 3, Retaken: 3}); err != nil || h != want {
		t.Fatalf("heal: %+v, %v; want %+v (units taken from the other buckets, none oversold)", h, err, want)
	}
	books(t, g, v.ID(), 3)
	buyers, err := g.Buyers(ctx(t), v.ID())
	if err != nil || len(buyers) != 6 {
		t.Fatalf("buyers %v, %v; want the 6 orders' users", buyers, err)
	}
	for _, o := range forgotten {
		if buyers[o.ID()] != o.UserID() {
			t.Fatalf("order %d held by user %d, want %d", o.ID(), buyers[o.ID()], o.UserID())
		}
		if err := g.ReserveAndAppend(ctx(t), orderFor(t, o.UserID(), v.ID())); !errors.Is(err, domain.ErrAlreadyClaimed) {
			t.Fatalf("a healed buyer claims again: %v, want duplicate", err)
		}
	}
	if h, err := g.Heal(ctx(t), v, committed); err != nil || h != (ports.Healed{}) {
		t.Fatalf("second heal: %+v, %v; want nothing", h, err)
	}
	if sold := sellOut(t, g, v.ID(), 50_000); sold != 3 {
		t.Fatalf("sold %d after the heal, want the 3 units left", sold)
	}
}
