package contract_test

import (
	"fmt"
	"testing"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// repoReadCases: the reads the gate's repair makes (RestoreGate.Repair): a
// cheap count of every live voucher's orders, then its orders in pages.
var repoReadCases = []repoCase{
	{"buyers_in_pages_and_counted", func(t *testing.T, s repoSubject) {
		v := repoAdd(t, s, 1, 5)
		w := repoAdd(t, s, 1, 5)
		none := repoAdd(t, s, 1, 5)
		orders := []domain.VoucherOrder{
			testenv.Order(t, 30, 3, v.ID()),
			testenv.Order(t, 10, 1, v.ID()),
			testenv.Order(t, 50, 5, v.ID()),
			testenv.Order(t, 20, 2, v.ID()),
			testenv.Order(t, 25, 2, v.ID()), // duplicate: not a buyer
			testenv.Order(t, 40, 4, w.ID()),
		}
		repoBatch(t, s, orders...)
		var got []domain.VoucherOrder
		var after domain.OrderID
		for pages := 0; ; pages++ {
			page, err := s.orders.BuyersAfter(repoCtx(t), v.ID(), after, 2)
			if err != nil || len(page) > 2 || pages > 3 {
				t.Fatalf("page %d after %d: %v, %v", pages, after, page, err)
			}
			if len(page) == 0 {
				break
			}
			got = append(got, page...)
			after = page[len(page)-1].ID()
		}
		want := []domain.VoucherOrder{orders[1], orders[3], orders[0], orders[2]} // by id
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("buyers in pages of 2: %v, want %v", got, want)
		}
		n, err := s.orders.CountBuyers(repoCtx(t), []domain.VoucherID{v.ID(), w.ID(), none.ID(), 999999})
		if err != nil {
			t.Fatal(err)
		}
		if n[v.ID()] != 4 || n[w.ID()] != 1 || n[none.ID()] != 0 || len(n) != 4 {
			t.Fatalf("counts %v, want %d:4 %d:1 %d:0 999999:0", n, v.ID(), w.ID(), none.ID())
		}
	}},
}
