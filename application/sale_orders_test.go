package application_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// countingOrders records the pages a use case asks for.
type countingOrders struct {
	ports.SaleOrders
	limits []int
}

func (c *countingOrders) OrdersAfter(ctx context.Context, v domain.VoucherID, f domain.OrderFilter, after domain.OrderID, limit int) ([]domain.OrderStatus, error) {
	c.limits = append(c.limits, limit)
	return c.SaleOrders.OrdersAfter(ctx, v, f, after, limit)
}

// sold claims n units of a fresh sale for users 1..n and writes them.
func (w *world) sold(t *testing.T, n int) domain.VoucherID {
	t.Helper()
	vid := w.live(t, n)
	for u := 1; u <= n; u++ {
		if _, err := w.claim.Handle(context.Background(), domain.UserID(u), vid); err != nil {
			t.Fatal(err)
		}
	}
	w.drain(t)
	return vid
}

func TestSaleOrdersPagesFollowTheCursor(t *testing.T) {
	w := newWorld(t, 64, nil)
	vid := w.sold(t, 7)
	list := application.NewListSaleOrders(w.vouchers, w.orders)
	ctx := context.Background()
	var got []domain.OrderID
	q := application.SaleOrdersQuery{Voucher: vid, Limit: 3}
	for pages := 1; ; pages++ {
		p, err := list.Handle(ctx, q)
		if err != nil || pages > 3 || len(p.Orders) > 3 {
			t.Fatalf("page %d: %d orders, %v", pages, len(p.Orders), err)
		}
		for _, st := range p.Orders {
			got = append(got, st.Order.ID())
		}
		if p.Next == 0 {
			if pages != 3 {
				t.Fatalf("%d pages of 3 for 7 orders, want 3", pages)
			}
			break
		}
		q.After = p.Next
	}
	if len(got) != 7 {
		t.Fatalf("listed %d orders, want 7", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("orders not in id order: %v", got)
		}
	}
}

func TestSaleOrdersRefuseBadInputBeforeReading(t *testing.T) {
	w := newWorld(t, 64, nil)
	vid := w.sold(t, 2)
	spy := &countingOrders{SaleOrders: w.orders}
	list := application.NewListSaleOrders(w.vouchers, spy)
	cases := []struct {
		name  string
		q     application.SaleOrdersQuery
		field string
	}{
		{"limit_above_max", application.SaleOrdersQuery{Voucher: vid, Limit: application.MaxOrderPage + 1}, "limit"},
		{"negative_limit", application.SaleOrdersQuery{Voucher: vid, Limit: -1}, "limit"},
		{"negative_cursor", application.SaleOrdersQuery{Voucher: vid, After: -5}, "after"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ve *domain.ValidationError
			if _, err := list.Handle(context.Background(), c.q); !errors.As(err, &ve) || ve.Field != c.field {
				t.Fatalf("%v, want a validation error on %s", err, c.field)
			}
		})
	}
	if _, err := list.Handle(context.Background(), application.SaleOrdersQuery{Voucher: vid + 100}); !errors.Is(err, domain.ErrVoucherNotFound) {
		t.Fatalf("unknown voucher: %v, want not found", err)
	}
	if len(spy.limits) != 0 {
		t.Fatalf("bad input read orders %d times", len(spy.limits))
	}
}

// The export asks for pages of ExportPage and hands each on before asking
// for the next: it holds one page, whatever the sale's size.
func TestSaleOrdersExportReadsInPages(t *testing.T) {
	w := newWorld(t, 4096, nil)
	n := 2*application.ExportPage + 1
	vid := w.sold(t, n)
	spy := &countingOrders{SaleOrders: w.orders}
	list := application.NewListSaleOrders(w.vouchers, spy)
	var sizes []int
	total := 0
	err := list.Export(context.Background(), vid, domain.AllOrders, func(p []domain.OrderStatus) error {
		sizes = append(sizes, len(p))
		total += len(p)
		return nil
	})
	if err != nil || total != n {
		t.Fatalf("exported %d of %d orders: %v", total, n, err)
	}
	if len(spy.limits) != 3 || len(sizes) != 3 || sizes[0] != application.ExportPage {
		t.Fatalf("asked for pages %v, handed on %v; want 3 of at most %d", spy.limits, sizes, application.ExportPage)
	}
	for _, l := range spy.limits {
		if l != application.ExportPage {
			t.Fatalf("asked for a page of %d, want %d", l, application.ExportPage)
		}
	}
	// An empty sale still gets one (empty) page, so the file has its header.
	empty := w.live(t, 1)
	calls := 0
	if err := list.Export(context.Background(), empty, domain.PaidOrders, func(p []domain.OrderStatus) error { calls++; return nil }); err != nil || calls != 1 {
		t.Fatalf("empty export: %d calls, %v", calls, err)
	}
}
