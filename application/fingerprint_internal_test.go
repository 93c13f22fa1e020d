package application

import (
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

// TestFingerprintTellsFieldBoundariesApart: two creation requests whose text
// fields differ only in where a separator byte sits are different vouchers,
// so an Idempotency-Key reused between them must read as "other values", not
// as a retry. Vouchers are made as a repository would, since NewSeckillVoucher
// refuses the control characters that once made such pairs collide.
func TestFingerprintTellsFieldBoundariesApart(t *testing.T) {
	begin := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	sale := domain.UnmarshalSplitSaleFromDatabase(5, begin, begin.Add(time.Hour), 1)
	voucher := func(title, sub, rules string) domain.Voucher {
		return domain.UnmarshalVoucherFromDatabase(0, domain.VoucherSpec{
			ShopID: 1, Title: title, SubTitle: sub, Rules: rules, PayValue: 1, ActualValue: 2,
		}, domain.VoucherSeckill, 1, sale)
	}
	for _, tc := range []struct {
		name string
		a, b domain.Voucher
	}{
		{name: "nul_moves_from_title_to_sub_title", a: voucher("a\x00", "b", ""), b: voucher("a", "\x00b", "")},
		{name: "nul_moves_from_sub_title_to_rules", a: voucher("t", "x\x00", "y"), b: voucher("t", "x", "\x00y")},
		{name: "text_moves_between_fields", a: voucher("ab", "", "r"), b: voucher("a", "b", "r")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if fingerprint(tc.a) == fingerprint(tc.b) {
				t.Fatalf("%q/%q/%q and %q/%q/%q share a fingerprint", tc.a.Title(), tc.a.SubTitle(), tc.a.Rules(),
					tc.b.Title(), tc.b.SubTitle(), tc.b.Rules())
			}
		})
	}
	if a, b := voucher("same", "s", "r"), voucher("same", "s", "r"); fingerprint(a) != fingerprint(b) {
		t.Fatal("the same voucher has two fingerprints: a retry would be refused")
	}
}

// TestFingerprintTellsLimitsApart: a key reused for the same sale with
// another limit per user is another voucher, not a retry; a limit of one is
// the fingerprint keys recorded before limits existed.
func TestFingerprintTellsLimitsApart(t *testing.T) {
	begin := time.Now().Add(time.Hour)
	sale := domain.UnmarshalSplitSaleFromDatabase(5, begin, begin.Add(time.Hour), 1)
	voucher := func(s domain.Sale) domain.Voucher {
		return domain.UnmarshalVoucherFromDatabase(0, domain.VoucherSpec{ShopID: 1, Title: "t"}, domain.VoucherSeckill, 1, s)
	}
	if fingerprint(voucher(sale)) != fingerprint(voucher(sale.WithStoredLimit(1))) {
		t.Fatal("a limit of one changed the fingerprint")
	}
	if fingerprint(voucher(sale)) == fingerprint(voucher(sale.WithStoredLimit(3))) {
		t.Fatal("limits 1 and 3 share a fingerprint")
	}
}
