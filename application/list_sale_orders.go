package application

import (
	"context"
	"fmt"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// The bounds of a sale's order list. A page is one indexed range read per
// status of the filter; MaxOrderPage keeps an admin's (or a stolen admin
// token's) request from making one answer as large as the sale.
const (
	DefaultOrderPage = 100
	MaxOrderPage     = 1000
	// ExportPage is how many orders the export reads at a time: what it
	// holds in memory, whatever the sale's size.
	ExportPage = 1000
)

// ListSaleOrders reads a sale's orders for its operator: a page at a time
// (Handle), or all of them a page at a time (Export), never the whole sale
// at once.
type ListSaleOrders struct {
	vouchers ports.VoucherRepository
	orders   ports.SaleOrders
}

func NewListSaleOrders(vouchers ports.VoucherRepository, orders ports.SaleOrders) *ListSaleOrders {
	mustHave("ListSaleOrders", map[string]any{"vouchers": vouchers, "orders": orders})
	return &ListSaleOrders{vouchers: vouchers, orders: orders}
}

// SaleOrdersQuery is one page: the voucher's orders the filter selects,
// with ids above After (0: from the first), at most Limit (0: the default).
type SaleOrdersQuery struct {
	Voucher domain.VoucherID
	Filter  domain.OrderFilter
	After   domain.OrderID
	Limit   int
}

// SaleOrdersPage is a page, and the cursor of the next one (0: this is the
// last).
type SaleOrdersPage struct {
	Orders []domain.OrderStatus
	Next   domain.OrderID
}

// Handle answers one page; a voucher that does not exist is
// domain.ErrVoucherNotFound, a limit or cursor out of range a validation
// error, and nothing is read for either.
func (h *ListSaleOrders) Handle(ctx context.Context, q SaleOrdersQuery) (SaleOrdersPage, error) {
	if q.Limit == 0 {
		q.Limit = DefaultOrderPage
	}
	if q.Limit < 1 || q.Limit > MaxOrderPage {
		return SaleOrdersPage{}, &domain.ValidationError{Field: "limit", Reason: fmt.Sprintf("must be 1 to %d", MaxOrderPage)}
	}
	if q.After < 0 {
		return SaleOrdersPage{}, &domain.ValidationError{Field: "after", Reason: "must be an order id (or 0)"}
	}
	if err := h.exists(ctx, q.Voucher); err != nil {
		return SaleOrdersPage{}, err
	}
	// One more than asked tells whether there is a next page without
	// another read.
	got, err := h.orders.OrdersAfter(ctx, q.Voucher, q.Filter, q.After, q.Limit+1)
	if err != nil {
		return SaleOrdersPage{}, fmt.Errorf("list orders of voucher %d: %w", q.Voucher, err)
	}
	page := SaleOrdersPage{Orders: got}
	if len(got) > q.Limit {
		page.Orders = got[:q.Limit]
		page.Next = page.Orders[q.Limit-1].Order.ID()
	}
	return page, nil
}

// Export hands every order the filter selects to page, ExportPage at a
// time in id order, and holds no more than one page: what it costs in
// memory does not grow with the sale. page is called at least once (with
// no orders for a sale that has none), the first time only once the
// voucher was found, so a caller can answer "not found" before it writes
// anything. The orders are read page by page, not as one snapshot: an
// order that changes state during the export is listed as one page read
// it, and none is listed twice.
func (h *ListSaleOrders) Export(ctx context.Context, voucher domain.VoucherID, filter domain.OrderFilter, page func([]domain.OrderStatus) error) error {
	if err := h.exists(ctx, voucher); err != nil {
		return err
	}
	var after domain.OrderID
	for first := true; ; first = false {
		got, err := h.orders.OrdersAfter(ctx, voucher, filter, after, ExportPage)
		if err != nil {
			return fmt.Errorf("export orders of voucher %d after %d: %w", voucher, after, err)
		}
		if len(got) > 0 || first {
			if err := page(got); err != nil {
				return err
			}
		}
		if len(got) < ExportPage {
			return nil
		}
		after = got[len(got)-1].Order.ID()
	}
}

func (h *ListSaleOrders) exists(ctx context.Context, voucher domain.VoucherID) error {
	if voucher <= 0 {
		return domain.ErrVoucherNotFound
	}
	if _, err := h.vouchers.Get(ctx, voucher); err != nil {
		return fmt.Errorf("voucher %d: %w", voucher, err)
	}
	return nil
}
