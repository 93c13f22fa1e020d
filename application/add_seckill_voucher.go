package application

import (
	"context"
	"fmt"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// AddSeckillVoucher stores a new seckill voucher and preheats the gate so it can
// be claimed.
type AddSeckillVoucher struct {
	vouchers ports.VoucherRepository
	gate     ports.StockGate
}

func NewAddSeckillVoucher(vouchers ports.VoucherRepository, gate ports.StockGate) *AddSeckillVoucher {
	mustHave("AddSeckillVoucher", map[string]any{"vouchers": vouchers, "gate": gate})
	return &AddSeckillVoucher{vouchers: vouchers, gate: gate}
}

// Handle saves the voucher, then preheats it. If the preheat fails the voucher
// is stored but not claimable (claims answer not_found) until the next start,
// when RestoreGate preheats every live voucher the gate lacks.
func (h *AddSeckillVoucher) Handle(ctx context.Context, v domain.Voucher) (domain.Voucher, error) {
	if !v.IsSeckill() {
		return domain.Voucher{}, &domain.ValidationError{Field: "type", Reason: "must be a seckill voucher with a sale"}
	}
	saved, err := h.vouchers.AddSeckill(ctx, v)
	if err != nil {
		return domain.Voucher{}, fmt.Errorf("save voucher: %w", err)
	}
	if err := h.gate.Preheat(ctx, saved); err != nil {
		return saved, fmt.Errorf("preheat voucher %d: %w", saved.ID(), err)
	}
	return saved, nil
}
