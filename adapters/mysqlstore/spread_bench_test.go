package mysqlstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/domain"
)

// BenchmarkCreateBatchSpread is what one MySQL sustains when the writers are
// spread over several vouchers or share one (docs/SCALING.md): writers
// goroutines each write batches of 200, on vouchers distinct vouchers
// (writer i on voucher i mod vouchers). Batches of one voucher lock its stock
// row until COMMIT, so they commit one at a time; batches of different
// vouchers commit in parallel and share fsyncs (group commit). b.N is split
// over the writers; orders/s is the aggregate.
func BenchmarkCreateBatchSpread(b *testing.B) {
	const size = 200
	for _, c := range []struct{ writers, vouchers int }{{1, 1}, {4, 1}, {4, 4}, {8, 8}} {
		b.Run(fmt.Sprintf("writers_%d/vouchers_%d", c.writers, c.vouchers), func(b *testing.B) {
			ctx := context.Background()
			db := benchDB(b)
			ids := make([]domain.VoucherID, c.vouchers)
			for i := range ids {
				ids[i] = benchVoucher(b, db).ID()
			}
			repo := mysqlstore.NewOrderRepo(db)
			var next atomic.Int64 // order and user ids, unique across writers
			batches := make(chan struct{}, b.N)
			for range b.N {
				batches <- struct{}{}
			}
			close(batches)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := range c.writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					batch := make([]domain.VoucherOrder, size)
					for range batches {
						for i := range batch {
							n := next.Add(1)
							o, err := domain.NewVoucherOrder(domain.OrderID(n), domain.UserID(n), ids[w%c.vouchers])
							if err != nil {
								b.Error(err)
								return
							}
							batch[i] = o
						}
						if _, err := repo.CreateBatch(ctx, batch); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(next.Load())/time.Since(start).Seconds(), "orders/s")
		})
	}
}
