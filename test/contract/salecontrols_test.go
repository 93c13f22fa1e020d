package contract_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestSaleControlsContract: SaleControls.ChangeSale on every store
// (memory, SQLite, MySQL) stores the sale change returns with its audit
// entry, stores nothing for an unchanged sale or a refusal, and answers
// not found for an unknown voucher.
func TestSaleControlsContract(t *testing.T) {
	for _, b := range repoBackends() {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)(t)
			sc, ok := s.vouchers.(ports.SaleControls)
			if !ok {
				t.Fatalf("%T is not a SaleControls", s.vouchers)
			}
			ctx := repoCtx(t)
			now := testenv.Now()
			sale, _ := domain.NewSale(5, now.Add(-time.Hour), now.Add(time.Hour))
			v, _ := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 3, Title: "controls"}, sale)
			v, err := s.vouchers.AddSeckill(ctx, v)
			if err != nil {
				t.Fatal(err)
			}
			endNow := func(v domain.Voucher) (domain.Voucher, domain.AuditEntry, error) {
				s, err := v.Sale().EndNow(now)
				if err != nil {
					return domain.Voucher{}, domain.AuditEntry{}, err
				}
				e, err := domain.NewAuditEntry(9, domain.ActionEndSale, v.ID(), `{"endTime":"now"}`)
				return v.WithSale(s), e, err
			}
			for i, wantChanged := range []bool{true, false} {
				got, changed, err := sc.ChangeSale(ctx, v.ID(), ports.Once{}, endNow)
				if err != nil || changed != wantChanged || !got.Sale().End().Equal(now) || got.Sale().Stock() != 5 {
					t.Fatalf("call %d: changed %v end %s stock %d err %v", i, changed, got.Sale().End(), got.Sale().Stock(), err)
				}
			}
			if stored, err := s.vouchers.Get(ctx, v.ID()); err != nil || !stored.Sale().End().Equal(now) {
				t.Fatalf("stored end %s (%v), want %s", stored.Sale().End(), err, now)
			}
			if trail := auditOf(t, s, v.ID()); len(trail) != 1 || trail[0].Action() != domain.ActionEndSale || trail[0].Admin() != 9 {
				t.Fatalf("trail %v, want one sale.end", trail)
			}
			refuse := func(v domain.Voucher) (domain.Voucher, domain.AuditEntry, error) {
				_, err := v.Sale().EndAt(now.Add(time.Hour), now)
				return domain.Voucher{}, domain.AuditEntry{}, err
			}
			if _, _, err := sc.ChangeSale(ctx, v.ID(), ports.Once{}, refuse); !errors.Is(err, domain.ErrSaleOver) {
				t.Fatalf("moving an ended sale's end: %v, want sale_over", err)
			}
			if _, _, err := sc.ChangeSale(ctx, v.ID()+1000, ports.Once{}, endNow); !errors.Is(err, domain.ErrVoucherNotFound) {
				t.Fatalf("unknown voucher: %v, want not_found", err)
			}
			if trail := auditOf(t, s, v.ID()); len(trail) != 1 {
				t.Fatalf("a refused change recorded an entry: %v", trail)
			}
		})
	}
}

// TestSaleControlsOnceContract: a change under an Idempotency-Key is
// stored once on every store (memory, SQLite, MySQL), whatever the
// retries, concurrent ones too; the key reused for another request is a
// validation error, nothing stored.
func TestSaleControlsOnceContract(t *testing.T) {
	for _, b := range repoBackends() {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)(t)
			sc := s.vouchers.(ports.SaleControls)
			ctx := repoCtx(t)
			now := testenv.Now()
			sale, _ := domain.NewSale(5, now.Add(-time.Hour), now.Add(time.Hour))
			v, _ := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 3, Title: "once"}, sale)
			v, err := s.vouchers.AddSeckill(ctx, v)
			if err != nil {
				t.Fatal(err)
			}
			add := func(v domain.Voucher) (domain.Voucher, domain.AuditEntry, error) {
				s, err := v.Sale().AddStock(2, now)
				if err != nil {
					return domain.Voucher{}, domain.AuditEntry{}, err
				}
				e, err := domain.NewAuditEntry(9, domain.ActionAddStock, v.ID(), `{"add":2}`)
				return v.WithSale(s), e, err
			}
			once := ports.Once{Key: "add-2-" + b.name, Fingerprint: "stock:2"}
			var wg sync.WaitGroup
			var changed atomic.Int64
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, c, err := sc.ChangeSale(ctx, v.ID(), once, add)
					if err != nil {
						t.Error(err)
					}
					if c {
						changed.Add(1)
					}
				}()
			}
			wg.Wait()
			if changed.Load() != 1 {
				t.Fatalf("%d of 4 retries stored the change, want 1", changed.Load())
			}
			if got, _ := s.vouchers.Get(ctx, v.ID()); got.Sale().Stock() != 7 || got.Sale().Added() != 2 {
				t.Fatalf("stock %d added %d, want 7 and 2", got.Sale().Stock(), got.Sale().Added())
			}
			var ve *domain.ValidationError
			if _, _, err := sc.ChangeSale(ctx, v.ID(), ports.Once{Key: once.Key, Fingerprint: "stock:3"}, add); !errors.As(err, &ve) {
				t.Fatalf("key reused for another amount: %v, want a validation error", err)
			}
			if trail := auditOf(t, s, v.ID()); len(trail) != 1 {
				t.Fatalf("%d audit entries, want 1", len(trail))
			}
		})
	}
}
