package application

import (
	"context"
	"fmt"

	"github.com/hmdp-go/seckill/domain"
)

// PollRoom tells a user who joined a waiting room where they stand and, once
// admitted, hands them their pass. It answers from the instance's view of the
// room (refreshed once per RoomRefresh), so a waiting user's poll costs no
// Redis: the ticket, signed at the join, says the user's place.
type PollRoom struct {
	dir    *RoomDirectory
	signer *RoomSigner
}

func NewPollRoom(dir *RoomDirectory, signer *RoomSigner) *PollRoom {
	mustHave("PollRoom", map[string]any{"dir": dir, "signer": signer})
	return &PollRoom{dir: dir, signer: signer}
}

// Handle answers the poll of user with ticket; a ticket that is not the
// user's for this voucher (or not signed here) is domain.ErrNotInRoom.
func (h *PollRoom) Handle(ctx context.Context, voucher domain.VoucherID, user domain.UserID, ticket string) (RoomStatus, error) {
	t, err := h.signer.OpenTicket(ticket, voucher, user)
	if err != nil {
		return RoomStatus{}, domain.ErrNotInRoom
	}
	v, err := h.dir.room(ctx, voucher)
	if err != nil {
		return RoomStatus{}, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if v == nil {
		return RoomStatus{}, domain.ErrNoRoom
	}
	return status(ctx, h.dir, h.signer, v, t, false)
}
