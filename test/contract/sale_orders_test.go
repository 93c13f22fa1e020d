package contract_test

import (
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// TestSaleOrdersContract: every SaleOrders lists a sale's orders in id
// order, a page at a time, by the operator's states, and no other sale's.
func TestSaleOrdersContract(t *testing.T) {
	for _, b := range repoBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.open(t)(t)
			r := lifeOf(t, s)
			list, ok := r.(ports.SaleOrders)
			if !ok {
				t.Fatalf("%T is not a ports.SaleOrders", r)
			}
			v, w := repoAdd(t, s, 1, 10), repoAdd(t, s, 1, 10)
			due, fresh := lifeT0.Add(-time.Hour), lifeT0
			o := []domain.VoucherOrder{
				lifeOrder(t, due, 1, 1, v.ID()),   // paid
				lifeOrder(t, due, 2, 2, v.ID()),   // cancelled by its buyer
				lifeOrder(t, due, 3, 3, v.ID()),   // expired
				lifeOrder(t, due, 4, 4, v.ID()),   // expired, then paid: refunding
				lifeOrder(t, fresh, 5, 5, v.ID()), // unpaid
				lifeOrder(t, fresh, 6, 6, v.ID()), // unpaid
				lifeOrder(t, due, 7, 7, w.ID()),   // another sale's
			}
			lifeCreate(t, r, o...)
			ctx := repoCtx(t)
			if _, _, err := lifePay(r, ctx, o[0], "tx-1", lifeT0); err != nil {
				t.Fatal(err)
			}
			if _, _, err := r.Cancel(ctx, o[1].ID()); err != nil {
				t.Fatal(err)
			}
			if _, err := r.ExpireDue(ctx, lifeT0, 100); err != nil {
				t.Fatal(err)
			}
			if _, _, err := lifePay(r, ctx, o[3], "tx-4", lifeT0); err != nil {
				t.Fatal(err)
			}
			want := map[domain.OrderFilter][]int{
				domain.AllOrders:       {0, 1, 2, 3, 4, 5},
				domain.UnpaidOrders:    {4, 5},
				domain.PaidOrders:      {0},
				domain.CancelledOrders: {1, 2},
				domain.ExpiredOrders:   {2},
				domain.RefundingOrders: {3},
			}
			for f, idx := range want {
				t.Run("filter_"+string(f), func(t *testing.T) {
					// Pages of 1 walk the cursor through every order.
					var got []domain.OrderStatus
					var after domain.OrderID
					for pages := 0; ; pages++ {
						page, err := list.OrdersAfter(ctx, v.ID(), f, after, 1)
						if err != nil || len(page) > 1 || pages > len(idx) {
							t.Fatalf("page %d after %d: %v, %v", pages, after, page, err)
						}
						if len(page) == 0 {
							break
						}
						got = append(got, page...)
						after = page[0].Order.ID()
					}
					if len(got) != len(idx) {
						t.Fatalf("filter %q listed %d orders, want %d", f, len(got), len(idx))
					}
					for i, st := range got {
						found := lifeFind(t, r, st.Order.ID())
						if st.Order != o[idx[i]] || st.State != found.State || st.CancelReason != found.CancelReason ||
							!st.PayDeadline.Equal(found.PayDeadline) {
							t.Fatalf("filter %q, order %d: %+v; want %s as Find has it: %+v", f, i, st, o[idx[i]], found)
						}
					}
					whole, err := list.OrdersAfter(ctx, v.ID(), f, 0, 100)
					if err != nil || len(whole) != len(idx) {
						t.Fatalf("one page of 100: %d orders, %v", len(whole), err)
					}
				})
			}
			if got, err := list.OrdersAfter(ctx, v.ID(), domain.AllOrders, 0, 0); err != nil || len(got) != 0 {
				t.Fatalf("limit 0: %v, %v; want nothing", got, err)
			}
			if got, err := list.OrdersAfter(ctx, 404, domain.AllOrders, 0, 10); err != nil || len(got) != 0 {
				t.Fatalf("unknown voucher: %v, %v; want nothing", got, err)
			}
			if _, err := list.OrdersAfter(ctx, v.ID(), domain.OrderFilter("bogus"), 0, 10); err == nil && s.db != nil {
				t.Fatal("an unknown filter was read as some other one")
			}
		})
	}
}
