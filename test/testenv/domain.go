package testenv

import (
	"testing"

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
