package memory

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Rooms is the in-memory RoomStore. It follows the Redis room's scripts step
// by step (test/contract runs one suite against both), under one mutex.
type Rooms struct {
	mu    sync.Mutex
	rooms map[domain.VoucherID]*room
	// Calls counts the operations that would each be one Redis round trip.
	calls int64
	gate  ports.GateAudit
}

type room struct {
	cfg      ports.RoomConfig
	joined   int64
	users    map[domain.UserID]int64
	drawn    bool
	n        int64
	seed     [domain.RoomSeedSize]byte
	boundary int64
	expired  int64
	usedN    int64
	lapsed   int64
	usedBy   map[domain.UserID]bool
	live     map[int64]bool // used positions not below expired
	steps    []ports.RoomStep
}

var _ ports.RoomStore = (*Rooms)(nil)

// NewRooms: gate, when given, tells Config that a sale without a room
// exists (as the Redis room reads the gate's key); nil answers RoomUnknown.
func NewRooms(gate ports.GateAudit) *Rooms {
	return &Rooms{rooms: make(map[domain.VoucherID]*room), gate: gate}
}

// Calls is how many store operations ran (each a Redis round trip in the
// real store).
func (s *Rooms) Calls() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Forget drops a room, as a Redis that lost its data would.
func (s *Rooms) Forget(id domain.VoucherID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rooms, id)
}

func (s *Rooms) Open(ctx context.Context, v domain.Voucher) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sale := v.Sale()
	if !sale.HasRoom() {
		return nil
	}
	if v.ID() <= 0 {
		return fmt.Errorf("open room: voucher has no id yet")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if _, ok := s.rooms[v.ID()]; !ok {
		s.rooms[v.ID()] = &room{
			cfg:   ports.NewRoomConfig(sale),
			users: make(map[domain.UserID]int64), usedBy: make(map[domain.UserID]bool), live: make(map[int64]bool),
		}
	}
	return nil
}

func (s *Rooms) Config(ctx context.Context, id domain.VoucherID) (ports.RoomConfig, ports.RoomLookup, error) {
	if err := ctx.Err(); err != nil {
		return ports.RoomConfig{}, ports.RoomUnknown, err
	}
	s.mu.Lock()
	s.calls++
	r, ok := s.rooms[id]
	s.mu.Unlock()
	if ok {
		return r.cfg, ports.RoomPresent, nil
	}
	if s.gate != nil {
		if _, held, err := s.gate.Stock(ctx, id); err != nil {
			return ports.RoomConfig{}, ports.RoomUnknown, err
		} else if held {
			return ports.RoomConfig{}, ports.RoomAbsent, nil
		}
	}
	return ports.RoomConfig{}, ports.RoomUnknown, nil
}

func (s *Rooms) Join(ctx context.Context, id domain.VoucherID, user domain.UserID, now time.Time, seed [domain.RoomSeedSize]byte) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	r, ok := s.rooms[id]
	if !ok {
		return 0, false, domain.ErrNoRoom
	}
	r.closeDraw(now, seed)
	if j, ok := r.users[user]; ok {
		return j, r.drawn, nil
	}
	j := r.joined
	r.joined++
	r.users[user] = j
	return j, r.drawn, nil
}

// closeDraw mirrors the scripts' close_draw.
func (r *room) closeDraw(now time.Time, seed [domain.RoomSeedSize]byte) {
	if r.drawn || domain.InDraw(r.cfg.Begin, now) {
		return
	}
	r.drawn, r.n, r.seed = true, r.joined, seed
}

func (s *Rooms) Advance(ctx context.Context, id domain.VoucherID, now time.Time, seed [domain.RoomSeedSize]byte, after int64) (ports.RoomState, error) {
	if err := ctx.Err(); err != nil {
		return ports.RoomState{}, err
	}
	now = now.Truncate(time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	r, ok := s.rooms[id]
	if !ok {
		return ports.RoomState{}, domain.ErrNoRoom
	}
	r.closeDraw(now, seed)
	left := int64(-1) // what the gate has left to sell; -1 unknown
	paused := false   // a paused sale's line holds, as the Redis room's
	if s.gate != nil {
		if n, ok, err := s.gate.Stock(ctx, id); err == nil && ok {
			left = int64(n)
		}
		if p, ok := s.gate.(interface{ Paused(domain.VoucherID) bool }); ok {
			paused = p.Paused(id)
		}
	}
	if r.drawn {
		ttl := r.cfg.Rules.PassTTL()
		was := r.expired
		for len(r.steps) > 0 && !r.steps[0].At.Add(ttl).After(now) {
			r.expired = r.steps[0].Boundary
			r.steps = r.steps[1:]
		}
		removed := int64(0)
		for p := range r.live {
			if p < r.expired {
				delete(r.live, p)
				removed++
			}
		}
		r.lapsed += r.expired - was - removed
		target := min(r.cfg.Rules.AdmitTarget(now.Sub(r.cfg.Begin)), r.joined)
		// Passes outstanding never exceed what is left to sell, so each is
		// worth a unit (the Redis room reads the gate's stock the same way).
		free := r.cfg.Cap
		if left >= 0 {
			free = left
		}
		free -= r.boundary - r.expired - int64(len(r.live))
		if next := min(target, r.boundary+max(free, 0)); next > r.boundary && !paused {
			r.boundary = next
			r.steps = append(r.steps, ports.RoomStep{Boundary: next, At: now})
		}
	}
	st := ports.RoomState{
		Joined: r.joined, Drawn: r.drawn, N: r.n, Boundary: r.boundary, Expired: r.expired, Used: r.usedN, Lapsed: r.lapsed,
		Outstanding: r.boundary - r.expired - int64(len(r.live)), Left: left,
		Seed: r.seed, // zero until the draw
	}
	i := sort.Search(len(r.steps), func(i int) bool { return r.steps[i].Boundary > after })
	st.Steps = append([]ports.RoomStep(nil), r.steps[i:]...)
	return st, nil
}

func (s *Rooms) Used(ctx context.Context, id domain.VoucherID, user domain.UserID) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	r, ok := s.rooms[id]
	return ok && r.usedBy[user], nil
}

func (s *Rooms) Use(ctx context.Context, id domain.VoucherID, user domain.UserID, position int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	r, ok := s.rooms[id]
	if !ok || r.usedBy[user] {
		return nil
	}
	r.usedBy[user] = true
	r.usedN++
	if position >= r.expired && position < r.boundary {
		r.live[position] = true
	}
	return nil
}
