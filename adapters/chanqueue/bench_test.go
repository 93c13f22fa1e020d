package chanqueue_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/domain"
)

// BenchmarkPublishReceive moves orders through the queue the way the claim
// path and the worker do: publishes one at a time, receives in batches.
// ns/op is per order; compare with the batch writer's to see that the queue
// is never what limits the drain.
func BenchmarkPublishReceive(b *testing.B) {
	for _, batch := range []int{1, 200} {
		b.Run(fmt.Sprintf("batch_%d", batch), func(b *testing.B) {
			ctx := context.Background()
			q := chanqueue.New(batch, 0)
			o, err := domain.NewVoucherOrder(1, 1, 1)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := q.Publish(ctx, o); err != nil {
					b.Fatal(err)
				}
				if q.Len() == batch {
					if _, err := q.Receive(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
