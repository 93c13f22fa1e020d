package domain

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"time"
)

// RoomRules are a sale's waiting room (docs/WAITING-ROOM.md); the zero value is "no waiting room".
type RoomRules struct {
	opensBefore time.Duration
	admitPerSec int
	passTTL     time.Duration
	margin      int
}

const (
	MinRoomOpensBefore = time.Second
	MaxRoomOpensBefore = 24 * time.Hour
	MaxRoomAdmitRate   = 100_000
	MinRoomPassTTL     = 5 * time.Second
	MaxRoomPassTTL     = 10 * time.Minute
	// RoomLead is how long before its begin a sale with a room must be created: every
	// instance learns of a new room within a second, and none may admit a passless claim.
	RoomLead = 3 * time.Second
)

func NewRoomRules(opensBefore time.Duration, admitPerSec int, passTTL time.Duration, margin int) (RoomRules, error) {
	switch {
	case opensBefore < MinRoomOpensBefore || opensBefore > MaxRoomOpensBefore:
		return RoomRules{}, invalid("waitingRoom.opensBeforeSeconds", "must be between %d and %d seconds, got %s",
			int(MinRoomOpensBefore/time.Second), int(MaxRoomOpensBefore/time.Second), opensBefore)
	case opensBefore%time.Second != 0:
		return RoomRules{}, invalid("waitingRoom.opensBeforeSeconds", "must be whole seconds, got %s", opensBefore)
	case admitPerSec < 1 || admitPerSec > MaxRoomAdmitRate:
		return RoomRules{}, invalid("waitingRoom.admitPerSecond", "must be between 1 and %d, got %d",
			MaxRoomAdmitRate, admitPerSec)
	case passTTL < MinRoomPassTTL || passTTL > MaxRoomPassTTL:
		return RoomRules{}, invalid("waitingRoom.passTtlSeconds", "must be between %d and %d seconds, got %s",
			int(MinRoomPassTTL/time.Second), int(MaxRoomPassTTL/time.Second), passTTL)
	case passTTL%time.Second != 0:
		return RoomRules{}, invalid("waitingRoom.passTtlSeconds", "must be whole seconds, got %s", passTTL)
	case margin < 0 || margin > MaxStock:
		return RoomRules{}, invalid("waitingRoom.margin", "must be between 0 and %d, got %d", MaxStock, margin)
	}
	return RoomRules{opensBefore: opensBefore, admitPerSec: admitPerSec, passTTL: passTTL, margin: margin}, nil
}

func (r RoomRules) OpensBefore() time.Duration { return r.opensBefore }
func (r RoomRules) AdmitPerSecond() int        { return r.admitPerSec }
func (r RoomRules) PassTTL() time.Duration     { return r.passTTL }
func (r RoomRules) Margin() int                { return r.margin }
func (r RoomRules) IsZero() bool               { return r.admitPerSec == 0 }

// UnmarshalRoomRulesFromDatabase rebuilds stored rules (no rate: no room). Use it only in stores.
func UnmarshalRoomRulesFromDatabase(opensBefore time.Duration, admitPerSec int, passTTL time.Duration, margin int) RoomRules {
	if admitPerSec <= 0 {
		return RoomRules{}
	}
	return RoomRules{opensBefore: opensBefore, admitPerSec: admitPerSec, passTTL: passTTL, margin: margin}
}

// WithRoom returns the sale, created at now, with a waiting room: it must begin RoomLead after now.
func (s Sale) WithRoom(now time.Time, r RoomRules) (Sale, error) {
	switch {
	case r.IsZero():
		s.room = RoomRules{}
		return s, nil
	case s.LimitPerUser() > 1:
		return Sale{}, invalid("waitingRoom",
			"needs a limit of one order per user (a pass admits one order), got limitPerUser %d", s.LimitPerUser())
	case s.begin.Before(now.Add(RoomLead)):
		return Sale{}, invalid("beginTime", "must be at least %s after now for a sale with a waiting room", RoomLead)
	}
	s.room = r
	return s, nil
}

// WithStoredRoom is the sale with its stored room. Use it only in repositories.
func (s Sale) WithStoredRoom(r RoomRules) Sale { s.room = r; return s }

// Room is the sale's waiting room; zero when it has none.
func (s Sale) Room() RoomRules { return s.room }
func (s Sale) HasRoom() bool   { return !s.room.IsZero() }

func (r RoomRules) Opens(begin time.Time) time.Time { return begin.Add(-r.opensBefore) }

// InDraw tells whether an operation at now is in the draw: at or before begin, to the store's millisecond.
func InDraw(begin, now time.Time) bool {
	return !now.Truncate(time.Millisecond).After(begin.Truncate(time.Millisecond))
}

// Waiting-room answers: ErrPassRequired and ErrPassExpired refuse a claim, the others a join or poll.
var (
	ErrPassRequired = &Refusal{"pass_required", "this sale has a waiting room: a valid pass is required"}
	ErrNoRoom       = &Refusal{"no_room", "this sale has no waiting room"}
	ErrRoomNotOpen  = &Refusal{"room_not_open", "the waiting room is not open yet"}
	ErrNotInRoom    = &Refusal{"not_in_room", "not in this waiting room: join it first"}
	ErrPassExpired  = &Refusal{"pass_expired", "the pass was not used in time; the place went to the next in line"}
)

// RoomRefusals lists the answers of a join or a poll that are not claim refusals.
func RoomRefusals() []*Refusal { return []*Refusal{ErrNoRoom, ErrRoomNotOpen, ErrNotInRoom} }

// AdmitTarget is how many places the rate allows elapsed (whole ms) after the begin.
func (r RoomRules) AdmitTarget(elapsed time.Duration) int64 {
	return int64(r.admitPerSec) * max(elapsed.Milliseconds(), 0) / 1000
}

const RoomSeedSize = 32

// Draw is the pre-queue's order, a keyed permutation of [0, n) computed per place:
// a balanced Feistel network (SHA-256 round function) over the smallest even power
// of two not below n, cycle-walked into [0, n) in a few steps (the domain is under 4n).
type Draw struct {
	n    uint64
	half uint // bits in each half
	seed [RoomSeedSize]byte
}

// feistelRounds: four make a pseudo-random permutation (Luby–Rackoff); two more are insurance.
const feistelRounds = 6

func NewDraw(seed [RoomSeedSize]byte, n int64) Draw {
	n = max(n, 0)
	h := uint(1)
	if n > 1 {
		h = uint((bits.Len64(uint64(n-1)) + 1) / 2)
	}
	return Draw{n: uint64(n), half: h, seed: seed}
}

// Place is the position (0 = first) of join index j: drawn if j < n, else first come, first served.
func (d Draw) Place(j int64) int64 {
	if j < 0 || uint64(j) >= d.n {
		return j
	}
	x := uint64(j)
	for {
		x = d.permute(x)
		if x < d.n {
			return int64(x)
		}
	}
}

func (d Draw) permute(x uint64) uint64 {
	mask := uint64(1)<<d.half - 1
	l, r := x>>d.half, x&mask
	var buf [RoomSeedSize + 9]byte
	copy(buf[:], d.seed[:])
	for i := 0; i < feistelRounds; i++ {
		buf[RoomSeedSize] = byte(i)
		binary.BigEndian.PutUint64(buf[RoomSeedSize+1:], r)
		sum := sha256.Sum256(buf[:])
		l, r = r, l^(binary.BigEndian.Uint64(sum[:8])&mask)
	}
	return l<<d.half | r
}
