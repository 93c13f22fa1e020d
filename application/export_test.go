package application

import (
	"context"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

// Handle is the tests' short form of Claim: a claim arriving now, without a
// waiting-room pass.
func (h *ClaimSeckill) Handle(ctx context.Context, user domain.UserID, voucher domain.VoucherID) (domain.OrderID, error) {
	c, err := h.Claim(ctx, Claim{User: user, Voucher: voucher, Arrived: time.Now()})
	return c.Order, err
}

// Window is the staleness bound of a sold-out answer.
func (g *SoldOutMarks) Window() time.Duration { return g.window }

// Handle is HandleOnce without an idempotency key.
func (h *AddSeckillVoucher) Handle(ctx context.Context, admin domain.UserID, v domain.Voucher) (domain.Voucher, error) {
	return h.HandleOnce(ctx, admin, "", v)
}

// Ticket signs user's ticket for the join index of voucher's room.
func (s *RoomSigner) Ticket(voucher domain.VoucherID, user domain.UserID, index int64) string {
	return s.sign(kindTicket, roomToken{voucher: voucher, user: user, n: index})
}
