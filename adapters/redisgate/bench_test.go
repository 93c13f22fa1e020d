package redisgate_test

import (
	"context"
	"errors"
	"fmt"
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

// BenchmarkMissing is the periodic repair's steady cost when nothing is
// lost: two pipelined round trips (every voucher's K, then an HMGET and a
// SISMEMBER per bucket). ns/op is one probe of n vouchers, on one node and
// on the cluster (one round trip per master there, each).
func BenchmarkMissing(b *testing.B) {
	for _, be := range testenv.RealRedisBackends() {
		for _, n := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("%s/vouchers=%d", be.Name, n), func(b *testing.B) {
				rdb := be.Client(b)
				prefix := testenv.KeyPrefix(b)
				b.Cleanup(func() { dropPrefix(rdb, prefix) })
				g := redisgate.New(rdb, redisgate.Options{Prefix: prefix})
				ctx := context.Background()
				now := time.Now()
				ids := make([]domain.VoucherID, n)
				for i := range ids {
					ids[i] = domain.VoucherID(i + 1)
					sale, _ := domain.NewSale(10, now.Add(-time.Hour), now.Add(time.Hour))
					v, _ := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "b"}, sale)
					if err := g.Preheat(ctx, v.WithID(ids[i])); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for range b.N {
					missing, err := g.Missing(ctx, ids)
					if err != nil || len(missing) != 0 {
						b.Fatalf("missing %v, %v", missing, err)
					}
				}
			})
		}
	}
}
