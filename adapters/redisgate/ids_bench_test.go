package redisgate_test

import (
	"context"
	"testing"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/test/testenv"
)

// BenchmarkIDsNext is what an order id costs a claim on the real Redis
// (skipped without SECKILL_TEST_REDIS_URL), leases included, with the
// service's default block. "serial" is one caller; "parallel" many, so it
// shows how callers contend for the issuer.
func BenchmarkIDsNext(b *testing.B) {
	rdb := testenv.RealRedis(b)
	for _, parallel := range []bool{false, true} {
		name := "serial"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			prefix := testenv.KeyPrefix(b)
			b.Cleanup(func() { cleanupKeys(b, prefix) })
			g := redisgate.NewIDs(rdb, redisgate.IDOptions{Prefix: prefix + "icr:order:"})
			ctx := context.Background()
			b.ReportAllocs()
			if !parallel {
				for b.Loop() {
					if _, err := g.Next(ctx); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := g.Next(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
