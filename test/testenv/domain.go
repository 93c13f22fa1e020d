package testenv

import (
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

// Order is the order id of user on voucher, failing the test if the domain
// refuses it: the ids tests pick are meant to be valid.
func Order(t testing.TB, id domain.OrderID, user domain.UserID, voucher domain.VoucherID) domain.VoucherOrder {
	t.Helper()
	o, err := domain.NewVoucherOrder(id, user, voucher)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// SeckillVoucher is a seckill voucher of spec selling stock units from begin
// to end, failing the test if the domain refuses it.
func SeckillVoucher(t testing.TB, spec domain.VoucherSpec, stock int, begin, end time.Time) domain.Voucher {
	t.Helper()
	s, err := domain.NewSale(stock, begin, end)
	if err != nil {
		t.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(spec, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
