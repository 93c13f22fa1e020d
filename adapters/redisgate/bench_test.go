package redisgate_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// BenchmarkReserve is the claim script's round trip on the real Redis
// (skipped without SECKILL_TEST_REDIS_URL): the floor of every claim.
// "serial" is one caller, so ns/op is the round trip; "parallel" is many,
// so ns/op is the inverse of what one client and one Redis sustain.
func BenchmarkReserve(b *testing.B) {
	rdb := testenv.RealRedis(b)
	cases := []struct {
		name  string
		stock int
		want  error
	}{
		{"success", domain.MaxStock, nil},
		{"sold_out", 1, domain.ErrSoldOut},
	}
	for _, tc := range cases {
		for _, parallel := range []bool{false, true} {
			name := tc.name + "/serial"
			if parallel {
				name = tc.name + "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				prefix := testenv.KeyPrefix(b)
				b.Cleanup(func() { cleanupKeys(b, prefix) })
				gate := redisgate.New(rdb, redisgate.Options{Prefix: prefix})
				now := time.Now()
				sale, err := domain.NewSale(tc.stock, now.Add(-time.Minute), now.Add(time.Hour))
				if err != nil {
					b.Fatal(err)
				}
				v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "bench", PayValue: 1, ActualValue: 2}, sale)
				if err != nil {
					b.Fatal(err)
				}
				v = v.WithID(1)
				if err := gate.Preheat(ctx, v); err != nil {
					b.Fatal(err)
				}
				var seq atomic.Int64
				claim := func() error {
					n := seq.Add(1)
					o, err := domain.NewVoucherOrder(domain.OrderID(n), domain.UserID(n), v.ID())
					if err != nil {
						return err
					}
					err = gate.Reserve(ctx, o)
					return err
				}
				if tc.want != nil {
					if err := claim(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				if !parallel {
					for b.Loop() {
						if err := claim(); !errors.Is(err, tc.want) {
							b.Fatalf("reserve: %v, want %v", err, tc.want)
						}
					}
					return
				}
				// 64 callers per core: like a stampede's concurrent handlers.
				b.SetParallelism(64)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := claim(); !errors.Is(err, tc.want) {
							b.Errorf("reserve: %v, want %v", err, tc.want)
							return
						}
					}
				})
			})
		}
	}
}

func cleanupKeys(b *testing.B, prefix string) {
	rdb := testenv.RealRedis(b)
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		_ = rdb.Unlink(ctx, iter.Val()).Err()
	}
}
