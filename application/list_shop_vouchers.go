package application

import (
	"context"
	"fmt"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// MaxShopVouchers caps a shop's list: the original's query has no LIMIT, so a
// shop with vouchers by the thousand made every public list request read them
// all. A shop with more shows its newest MaxShopVouchers.
const MaxShopVouchers = 200

// ListShopVouchers returns a shop's vouchers, as the original's /voucher/list,
// at most MaxShopVouchers of them.
type ListShopVouchers struct {
	vouchers ports.VoucherRepository
}

func NewListShopVouchers(vouchers ports.VoucherRepository) *ListShopVouchers {
	mustHave("ListShopVouchers", map[string]any{"vouchers": vouchers})
	return &ListShopVouchers{vouchers: vouchers}
}

func (h *ListShopVouchers) Handle(ctx context.Context, shop domain.ShopID) ([]domain.Voucher, error) {
	vs, err := h.vouchers.ListByShop(ctx, shop, MaxShopVouchers)
	if err != nil {
		return nil, fmt.Errorf("list vouchers of shop %d: %w", shop, err)
	}
	return vs, nil
}
