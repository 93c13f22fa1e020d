package soldout_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/soldout"
	"github.com/hmdp-go/seckill/domain"
)

// BenchmarkReserveSoldOut is the mark's own cost on the flash sale's common
// answer, many handlers at once. Against the in-memory gate it saves
// nothing; against Redis each hit saves a round trip (see the redisgate
// benchmark for its price).
func BenchmarkReserveSoldOut(b *testing.B) {
	clk := &clock{t: saleStart.Add(time.Minute)}
	inner := &counting{Gate: memory.NewGate(clk)}
	f := newMarked(clk, inner, soldout.MaxWindow)
	g := f.gate
	v := f.voucher(b, 1, 1)
	ctx := context.Background()
	if err := g.Preheat(ctx, v); err != nil {
		b.Fatal(err)
	}
	var user atomic.Int64
	reserve := func() error {
		n := user.Add(1)
		o, err := domain.NewVoucherOrder(domain.OrderID(n), domain.UserID(n), v.ID())
		if err != nil {
			return err
		}
		err = f.adm.Admit(ctx, o)
		return err
	}
	if err := reserve(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := reserve(); !errors.Is(err, domain.ErrSoldOut) {
				b.Errorf("reserve: %v", err)
				return
			}
		}
	})
	b.StopTimer()
	if asked := inner.reserves.Load(); asked > 2 {
		b.Fatalf("the gate was asked %d times", asked)
	}
}
