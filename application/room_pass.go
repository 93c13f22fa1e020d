package application

import (
	"context"
	"fmt"

	"github.com/hmdp-go/seckill/domain"
)

// RoomPassCheck is the claim's one step for waiting rooms, run before the
// claim: a sale without a room passes at the cost of a map lookup (after the
// instance's first look at the sale), and a sale with one needs the user's
// valid pass, checked by its signature with no Redis at all.
type RoomPassCheck struct {
	dir    *RoomDirectory
	signer *RoomSigner
}

func NewRoomPassCheck(dir *RoomDirectory, signer *RoomSigner) *RoomPassCheck {
	mustHave("RoomPassCheck", map[string]any{"dir": dir, "signer": signer})
	return &RoomPassCheck{dir: dir, signer: signer}
}

// Check returns the position the pass admits (-1 for a sale without a room)
// or domain.ErrPassRequired (no pass, or not this user's for this sale),
// domain.ErrPassExpired, or domain.ErrAlreadyClaimed when the user has used
// a pass of this room already: a pass admits one order, so an order that
// lapsed or was cancelled does not let its pass claim again (even where
// SECKILL_RECLAIM_AFTER_CANCEL frees the buyer), and its unit goes to the
// line. ErrBusy when the room could not be read. pass is asked for the
// claim's pass only when the sale has a room, so a claim without one does
// not even read it; a claim with a valid one costs one store read more.
func (h *RoomPassCheck) Check(ctx context.Context, voucher domain.VoucherID, user domain.UserID, pass func() string) (int64, error) {
	v, err := h.dir.room(ctx, voucher)
	if err != nil {
		return -1, err
	}
	if v == nil {
		return -1, nil
	}
	p, err := h.signer.OpenPass(pass(), voucher, user)
	if err != nil {
		return -1, domain.ErrPassRequired
	}
	if !h.dir.clock.Now().Before(p.Expires) {
		return -1, domain.ErrPassExpired
	}
	used, err := h.dir.store.Used(ctx, voucher, user)
	if err != nil {
		return -1, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if used {
		return -1, domain.ErrAlreadyClaimed
	}
	return p.Position, nil
}

// Used records that a claim succeeded with the pass for position (what Check
// returned for a sale with a room), so its place counts as used, not
// outstanding. One store round trip; a failure leaves the place to expire
// with its pass.
func (h *RoomPassCheck) Used(ctx context.Context, voucher domain.VoucherID, user domain.UserID, position int64) error {
	if err := h.dir.store.Use(ctx, voucher, user, position); err != nil {
		return fmt.Errorf("mark pass of voucher %d used: %w", voucher, err)
	}
	return nil
}
