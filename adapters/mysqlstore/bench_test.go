package mysqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// benchDB is a fresh, migrated database on SECKILL_TEST_MYSQL_DSN (the
// benchmark is skipped without it), closed when the benchmark ends.
func benchDB(b *testing.B) *bun.DB {
	b.Helper()
	db, err := mysqlstore.OpenMySQL(testenv.MySQLDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	if _, err := mysqlstore.Migrate(context.Background(), db); err != nil {
		b.Fatal(err)
	}
	return db
}

// benchVoucher stores an open sale whose stock never runs out.
func benchVoucher(b *testing.B, db *bun.DB) domain.Voucher {
	b.Helper()
	now := time.Now()
	sale, err := domain.NewSale(domain.MaxStock, now.Add(-time.Minute), now.Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "bench", PayValue: 1, ActualValue: 2}, sale)
	if err != nil {
		b.Fatal(err)
	}
	saved, err := mysqlstore.NewVoucherRepo(db).AddSeckill(context.Background(), v)
	if err != nil {
		b.Fatal(err)
	}
	return saved
}

// BenchmarkCreateBatch is the batch writer on the real MySQL (skipped
// without SECKILL_TEST_MYSQL_DSN): one transaction per batch. ns/op is per
// batch; the orders/s metric is what a single writer sustains. Batch 1 is
// the per-order shape, for comparison.
func BenchmarkCreateBatch(b *testing.B) {
	for _, size := range []int{1, 100, 200, 500} {
		b.Run(fmt.Sprintf("batch_%d", size), func(b *testing.B) {
			ctx := context.Background()
			db := benchDB(b)
			saved := benchVoucher(b, db)
			repo := mysqlstore.NewOrderRepo(db)
			next := int64(0)
			batch := make([]domain.VoucherOrder, size)
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				for i := range batch {
					next++
					o, err := domain.NewVoucherOrder(domain.OrderID(next), domain.UserID(next), saved.ID())
					if err != nil {
						b.Fatal(err)
					}
					batch[i] = o
				}
				outs, err := repo.CreateBatch(ctx, batch)
				if err != nil {
					b.Fatal(err)
				}
				if outs[len(outs)-1].State != domain.OrderCreated {
					b.Fatalf("outcome %+v, want created", outs[len(outs)-1])
				}
			}
			b.ReportMetric(float64(next)/time.Since(start).Seconds(), "orders/s")
		})
	}
}
