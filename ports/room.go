package ports

import (
	"context"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

// RoomConfig is what a waiting room's store keeps of its sale.
type RoomConfig struct {
	Rules      domain.RoomRules
	Begin, End time.Time
	Cap        int64 // outstanding passes: the stock at opening plus the margin
}

// NewRoomConfig is sale s's room as a store keeps it, its times to the millisecond.
func NewRoomConfig(s domain.Sale) RoomConfig {
	return RoomConfig{Rules: s.Room(), Begin: s.Begin().Truncate(time.Millisecond), End: s.End().Truncate(time.Millisecond),
		Cap: int64(s.Stock()) + int64(s.Room().Margin())}
}

// RoomStep is one advance of a room's boundary: positions up to Boundary were admitted At.
type RoomStep struct {
	Boundary int64
	At       time.Time
}

// RoomState is a waiting room's shared state, as one Advance returns it.
type RoomState struct {
	Joined int64 // join indexes given: 0..Joined-1
	// Drawn: the draw has closed; N of the joiners are in it, under Seed.
	Drawn bool
	N     int64
	Seed  [domain.RoomSeedSize]byte
	// Below Boundary admitted, below Expired past a pass's lifetime; passes Used, or Lapsed unused.
	Boundary, Expired, Used, Lapsed int64
	// Outstanding passes (live, unused) never exceed Left, the gate's stock (-1: a split voucher).
	Outstanding, Left int64
	// Steps are the advances above the caller's boundary, oldest first, down to Expired.
	Steps []RoomStep
}

type RoomLookup int8

const (
	RoomUnknown RoomLookup = iota
	RoomAbsent
	RoomPresent
)

// RoomStore keeps every sale's waiting room; each operation is atomic, its cost not growing with joiners.
type RoomStore interface {
	// Open writes v's room (NewRoomConfig) unless stored, before the gate makes v claimable.
	Open(ctx context.Context, v domain.Voucher) error
	// Config reads a voucher's room; without one, RoomAbsent if the sale's gate exists, else RoomUnknown.
	Config(ctx context.Context, id domain.VoucherID) (RoomConfig, RoomLookup, error)
	// Join gives user the next join index, or the one given before; the first Join or Advance past
	// domain.InDraw closes the draw, and drawn tells whether it was closed. domain.ErrNoRoom without a room.
	Join(ctx context.Context, id domain.VoucherID, user domain.UserID, now time.Time, seed [domain.RoomSeedSize]byte) (j int64, drawn bool, err error)
	// Advance closes the draw when due, voids stale passes, moves the boundary as the rate allows
	// (within the joiners and the cap) and returns the state. domain.ErrNoRoom without a room.
	Advance(ctx context.Context, id domain.VoucherID, now time.Time, seed [domain.RoomSeedSize]byte, after int64) (RoomState, error)
	// Use records that user's pass, for position, was used; again, nothing.
	Use(ctx context.Context, id domain.VoucherID, user domain.UserID, position int64) error
	// Used tells whether user has used a pass of id's room: a pass admits one order.
	Used(ctx context.Context, id domain.VoucherID, user domain.UserID) (bool, error)
}
