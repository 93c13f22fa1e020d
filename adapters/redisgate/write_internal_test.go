package redisgate

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// TestRebuildNeverOverwritesAGateThatAppeared: Restore's shortcut (the gate
// exists: nothing to do) runs before it stages the buyers, so a Preheat, or
// another instance's Restore, may write the gate in between; write.lua's
// 'fill' then leaves that gate and the claims it took alone, where
// 'overwrite' (reconcile --fix) replaces it. The script is run here as
// Restore runs it after losing that race.
func TestRebuildNeverOverwritesAGateThatAppeared(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	g := New(rdb, Options{Prefix: "w:"})
	ctx := context.Background()
	now := time.Now()
	sale, err := domain.NewSale(5, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "t"}, sale)
	if err != nil {
		t.Fatal(err)
	}
	v = v.WithID(9)
	if err := g.Preheat(ctx, v); err != nil {
		t.Fatal(err)
	}
	o, _ := domain.NewVoucherOrder(11, 7, 9)
	if err := g.Reserve(ctx, o); err != nil {
		t.Fatal(err)
	}
	k := redisschema.KeysFor(g.prefix, v.ID())
	write := func(mode string) int64 {
		code, err := g.write(ctx, v.Sale(), k, 0, k.Staging("t"), v.Sale().Stock(), 0, mode)
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	if code := write("fill"); code != 0 {
		t.Fatalf("fill over a gate that appeared: %d, want 0 (left alone)", code)
	}
	if stock, _, _ := g.Stock(ctx, v.ID()); stock != 4 {
		t.Fatalf("stock %d after the fill, want 4: the claim taken meanwhile is kept", stock)
	}
	if code := write("overwrite"); code != 1 {
		t.Fatalf("overwrite: %d, want 1", code)
	}
	if stock, _, _ := g.Stock(ctx, v.ID()); stock != 5 {
		t.Fatalf("stock %d after the overwrite, want the database's 5", stock)
	}
}
