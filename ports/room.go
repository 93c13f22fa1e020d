package ports

import (
	"context"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

// RoomConfig is what a waiting room's store keeps of its sale: the rules, the
// window and the cap on outstanding passes (the stock at opening plus the
// margin).
type RoomConfig struct {
	Rules      domain.RoomRules
	Begin, End time.Time
	Cap        int64
}

// NewRoomConfig is what a store keeps of sale s's room when it opens it:
// its times to the millisecond (the store's resolution).
func NewRoomConfig(s domain.Sale) RoomConfig {
	return RoomConfig{Rules: s.Room(), Begin: s.Begin().Truncate(time.Millisecond), End: s.End().Truncate(time.Millisecond),
		Cap: int64(s.Stock()) + int64(s.Room().Margin())}
}

// RoomStep is one advance of a room's boundary: the positions below Boundary
// (and not below the previous step's) were admitted At.
type RoomStep struct {
	Boundary int64
	At       time.Time
}

// RoomState is a waiting room's shared state, as one Advance returns it.
type RoomState struct {
	// Joined is how many join indexes were given (0..Joined-1).
	Joined int64
	// Drawn: the draw has closed; N of the joiners are in it, under Seed.
	Drawn bool
	N     int64
	Seed  [domain.RoomSeedSize]byte
	// Boundary: positions below it are admitted. Expired: positions below
	// it were admitted more than a pass's lifetime ago (their passes are
	// used or void). Used counts the passes used, Lapsed the places whose
	// pass expired unused.
	Boundary, Expired, Used, Lapsed int64
	// Outstanding is how many passes are live and unused. Left is what the
	// sale's gate has left to sell (passes outstanding never exceed it), or
	// -1 where the room cannot read it (a voucher split into buckets).
	Outstanding, Left int64
	// Steps are the boundary's advances above the boundary the caller
	// passed, oldest first, down to (not below) Expired.
	Steps []RoomStep
}

// RoomLookup is what RoomStore.Config found.
type RoomLookup int8

const (
	RoomUnknown RoomLookup = iota
	RoomAbsent
	RoomPresent
)

// RoomStore keeps every sale's waiting room. Each operation is atomic and its
// Redis cost does not grow with the number of joiners.
type RoomStore interface {
	// Open writes v's room (NewRoomConfig of v's sale) unless the store has
	// one; it is idempotent and must run before the gate makes v claimable.
	// For a sale without a room it does nothing, not even a round trip.
	Open(ctx context.Context, v domain.Voucher) error
	// Config reads a voucher's room. Without one it tells whether the
	// sale's gate exists (RoomAbsent: the sale has no room, for good, since
	// a room is opened before its gate) or not (RoomUnknown: no such sale
	// yet, or one about to be opened).
	Config(ctx context.Context, id domain.VoucherID) (RoomConfig, RoomLookup, error)
	// Join gives user the next join index, or the one it was given before.
	// The first Join or Advance at a time after the draw closes (see
	// domain.InDraw) closes it: N is frozen to the joiners so far and
	// seed is kept as the draw's seed, unless one was kept already. drawn
	// tells whether the draw was closed when this join ran, whoever closed
	// it: a join whose now is before the begin may still run after another
	// instance's operation closed it, and its index is then past the draw.
	// It returns domain.ErrNoRoom when the store has no room for id.
	Join(ctx context.Context, id domain.VoucherID, user domain.UserID, now time.Time, seed [domain.RoomSeedSize]byte) (j int64, drawn bool, err error)
	// Advance closes the draw when due (like Join), voids the passes older
	// than their lifetime, moves the boundary on to what the admission rate
	// allows since the begin (never past the joiners, never more passes
	// outstanding than the cap), and returns the state with the steps above
	// after. domain.ErrNoRoom when the store has no room for id.
	Advance(ctx context.Context, id domain.VoucherID, now time.Time, seed [domain.RoomSeedSize]byte, after int64) (RoomState, error)
	// Use records that user's pass, for position, was used; again, nothing.
	Use(ctx context.Context, id domain.VoucherID, user domain.UserID, position int64) error
	// Used tells whether user has used a pass of id's room (false without
	// a room): a pass admits one order, whatever becomes of that order.
	Used(ctx context.Context, id domain.VoucherID, user domain.UserID) (bool, error)
}
