package redisgate_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestMeasureClaimsPerK is the measurement behind docs/SCALING-buckets.md,
// not a check: it asserts nothing about speed, and runs only when
// SECKILL_BUCKETS_MEASURE=1. For K = 1 (the unsplit gate, redisgate) and K =
// 2, 3 (this package) it fires claims on one voucher with a stock too large
// to sell out, from 64 goroutines, and logs claims/s and each master's CPU
// seconds and script calls. Then a small sale (stock 10, 1000 users) for K = 1
// and K = 3: Redis commands per claim, the cost of splitting what need not be.
func TestMeasureClaimsPerK(t *testing.T) {
	if os.Getenv("SECKILL_BUCKETS_MEASURE") != "1" {
		t.Skip("measurement: set SECKILL_BUCKETS_MEASURE=1")
	}
	rdb := testenv.RedisCluster(t)
	const claims, workers = 60000, 64
	for _, k := range []int{1, 2, 3} {
		prefix := testenv.KeyPrefix(t)
		testenv.DropPrefix(t, rdb, prefix)
		v := newVoucher(t, 1_000_000)
		claim := preheatK(t, rdb, prefix, v, k)
		rate, stats := fire(t, rdb, claim, v.ID(), claims, workers, 1)
		t.Logf("big sale K=%d: %.0f claims/s", k, rate)
		for addr, s := range stats {
			t.Logf("  master %s: %.2fs CPU, %d commands, %.2fs in scripts (%.1f µs of script per claim of the voucher)",
				addr, s.cpu, s.calls, float64(s.scriptUsec)/1e6, float64(s.scriptUsec)/float64(claims))
		}
	}
	for _, k := range []int{1, 3} {
		prefix := testenv.KeyPrefix(t)
		testenv.DropPrefix(t, rdb, prefix)
		v := newVoucher(t, 10)
		claim := preheatK(t, rdb, prefix, v, k)
		_, stats := fire(t, rdb, claim, v.ID(), 1000, workers, 1)
		var calls, usec int64
		for _, s := range stats {
			calls += s.calls
			usec += s.scriptUsec
		}
		t.Logf("small sale K=%d: %.1f Redis commands per claim, %.1f µs of script per claim", k, float64(calls)/1000, float64(usec)/1000)
	}
}

func preheatK(t *testing.T, rdb *redis.ClusterClient, prefix string, v domain.Voucher, k int) func(context.Context, domain.VoucherOrder) error {
	g := redisgate.New(rdb, redisgate.Options{Prefix: prefix})
	if err := g.Preheat(ctx(t), splitInto(t, v, k)); err != nil {
		t.Fatal(err)
	}
	return g.ReserveAndAppend
}

func fire(t *testing.T, rdb *redis.ClusterClient, claim func(context.Context, domain.VoucherOrder) error,
	vid domain.VoucherID, n, workers int, firstUser int64) (float64, map[string]nodeStats) {
	var next atomic.Int64
	var seq atomic.Uint32
	before := masterStats(t, rdb)
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				id, _ := domain.NewOrderID(time.Now(), seq.Add(1))
				o, _ := domain.NewVoucherOrder(id, domain.UserID(firstUser+i), vid)
				if err := claim(context.Background(), o); err != nil && !errors.Is(err, domain.ErrSoldOut) && !strings.Contains(err.Error(), "busy") {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rate := float64(n) / time.Since(start).Seconds()
	after := masterStats(t, rdb)
	out := map[string]nodeStats{}
	for addr, s := range after {
		out[addr] = nodeStats{calls: s.calls - before[addr].calls, cpu: s.cpu - before[addr].cpu, scriptUsec: s.scriptUsec - before[addr].scriptUsec}
	}
	return rate, out
}
