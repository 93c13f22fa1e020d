package application

import (
	"context"
	"fmt"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// ListShopVouchers returns a shop's vouchers, as the original's /voucher/list.
type ListShopVouchers struct {
	vouchers ports.VoucherRepository
}

func NewListShopVouchers(vouchers ports.VoucherRepository) *ListShopVouchers {
	mustHave("ListShopVouchers", map[string]any{"vouchers": vouchers})
	return &ListShopVouchers{vouchers: vouchers}
}

func (h *ListShopVouchers) Handle(ctx context.Context, shop domain.ShopID) ([]domain.Voucher, error) {
	vs, err := h.vouchers.ListByShop(ctx, shop)
	if err != nil {
		return nil, fmt.Errorf("list vouchers of shop %d: %w", shop, err)
	}
	return vs, nil
}
