package redisgate_test

import (
	"context"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// What only the Redis layout has (the behaviour is test/contract's
// TestGateProbeContract): a buyers hash the heal recreates expires with the
// sale, as the claim script's does, and the units it found sold again are
// recorded in the voucher hash for an operator.
func TestHealKeepsExpiryAndRecordsOversold(t *testing.T) {
	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			prefix := testenv.KeyPrefix(t)
			testenv.DropPrefix(t, rdb, prefix)
			ctx := context.Background()
			g := redisgate.New(rdb, redisgate.Options{Prefix: prefix, Retention: 2 * time.Hour})
			now := testenv.WallClock{}.Now()
			end := now.Add(time.Hour)
			v := voucher(t, 42, 1, now.Add(-time.Minute), end)
			if err := g.Preheat(ctx, v); err != nil {
				t.Fatal(err)
			}
			k := redisschema.KeysFor(prefix, 42)
			// The gate forgot order 11 of user 1 (no buyers hash at all), and
			// sold its unit again to user 2.
			if err := g.Reserve(ctx, order(t, 12, 2, 42)); err != nil {
				t.Fatal(err)
			}
			if err := rdb.Del(ctx, k.Buyers).Err(); err != nil {
				t.Fatal(err)
			}
			h, err := g.Heal(ctx, v, []domain.VoucherOrder{order(t, 11, 1, 42)})
			if err != nil || h != (ports.Healed{Restored: 1, Oversold: 1}) {
				t.Fatalf("heal = %+v, %v", h, err)
			}
			at, err := rdb.PExpireTime(ctx, k.Buyers).Result()
			want := end.Add(2 * time.Hour).UnixMilli()
			if d := at.Milliseconds() - want; err != nil || d < -1000 || d > 1000 {
				t.Fatalf("healed buyers hash expires at %d (%v), want end + retention = %d", at.Milliseconds(), err, want)
			}
			if n, err := rdb.HGet(ctx, k.Voucher, "oversold").Int(); err != nil || n != 1 {
				t.Fatalf("oversold in the voucher hash = %d, %v; want 1", n, err)
			}
		})
	}
}
