package application_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The claim use case's own cost, against the memory fakes: what the service
// adds on top of the gate's round trip. Compare runs with benchstat.

// reserveOnly admits by reserving, and hands the order to no one, so a long
// benchmark never fills a bounded queue.
type reserveOnly struct{ gate ports.StockGate }

func (a reserveOnly) Admit(ctx context.Context, o domain.VoucherOrder) error {
	return a.gate.Reserve(ctx, o)
}

func benchClaim(b testing.TB, stock int, marked bool) (*application.ClaimSeckill, domain.VoucherID) {
	b.Helper()
	clock := testenv.NewClock(time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC))
	var gate ports.StockGate = memory.NewGate(clock)
	var marks *application.SoldOutMarks
	if marked {
		marks = application.NewSoldOutMarks(application.MaxSoldOutWindow, nil)
		gate = marks.Gate(gate)
	}
	sale, err := domain.NewSale(stock, clock.Now().Add(-time.Hour), clock.Now().Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "bench", PayValue: 1, ActualValue: 2}, sale)
	if err != nil {
		b.Fatal(err)
	}
	benchVouchers := memory.NewVouchers()
	saved, err := application.NewAddSeckillVoucher(benchVouchers, memory.NewOrders(benchVouchers), gate).Handle(context.Background(), testAdmin, v)
	if err != nil {
		b.Fatal(err)
	}
	claim := application.NewClaimSeckill(memory.NewIDs(clock), reserveOnly{gate})
	if marked {
		claim.WithSoldOutMarks(marks)
	}
	return claim, saved.ID()
}

// BenchmarkClaimSeckill: every claim a new user. "success" reserves and
// publishes; "sold_out" is the flash sale's common case, refused by the
// gate; "sold_out_marked" is the same behind the local sold-out mark.
func BenchmarkClaimSeckill(b *testing.B) {
	cases := []struct {
		name   string
		stock  int
		marked bool
		want   error
	}{
		{"success", domain.MaxStock, false, nil},
		{"sold_out", 1, false, domain.ErrSoldOut},
		{"sold_out_marked", 1, true, domain.ErrSoldOut},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			claim, vid := benchClaim(b, tc.stock, tc.marked)
			ctx := context.Background()
			var user atomic.Int64
			if tc.want != nil {
				// Sell the one unit first.
				if _, err := claim.Handle(ctx, domain.UserID(user.Add(1)), vid); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := claim.Handle(ctx, domain.UserID(user.Add(1)), vid); !errors.Is(err, tc.want) {
						b.Errorf("claim: %v, want %v", err, tc.want)
						return
					}
				}
			})
		})
	}
}

// BenchmarkSoldOutPreCheck is the sold-out edge's question on every request
// of a stampede on a sold-out voucher (ClaimSeckill.SoldOut: the mark, and
// the answer recorded by the page's counts, as the service wires them),
// many handlers at once.
func BenchmarkSoldOutPreCheck(b *testing.B) {
	claim, vid := benchClaim(b, 1, true)
	claim.WithRecorder(metrics.NewClaimCounter())
	ctx := context.Background()
	for u := domain.UserID(1); u <= 2; u++ { // the unit sold, then the gate's sold out marks it
		_, _ = claim.Handle(ctx, u, vid)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !claim.SoldOut(vid) {
				b.Error("not sold out from the mark")
				return
			}
		}
	})
}
