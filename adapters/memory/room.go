package memory

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Rooms is the in-memory RoomStore: the Redis room's scripts step by step,
// under one mutex.
type Rooms struct {
	mu    mutex
	rooms map[domain.VoucherID]*room
	calls int64
	gate  ports.GateAudit
}

type room struct {
	cfg    ports.RoomConfig
	st     ports.RoomState         // but for Outstanding, Left and Steps, which Advance works out
	users  map[domain.UserID]int64 // each joiner's join index
	usedBy map[domain.UserID]bool
	live   map[int64]bool // used positions not below st.Expired
	steps  []ports.RoomStep
}

var _ ports.RoomStore = (*Rooms)(nil)

// NewRooms: gate, if not nil, tells Config that a sale without a room exists
// (as the Redis room reads the gate's key).
func NewRooms(gate ports.GateAudit) *Rooms {
	return &Rooms{rooms: make(map[domain.VoucherID]*room), gate: gate}
}

// Calls is how many store operations (Redis round trips) ran.
func (s *Rooms) Calls() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *Rooms) Open(ctx context.Context, v domain.Voucher) error {
	if err := s.mu.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	sale := v.Sale()
	if !sale.HasRoom() {
		return nil
	}
	if v.ID() <= 0 {
		return fmt.Errorf("open room: voucher has no id yet")
	}
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
	if err := s.mu.lock(ctx); err != nil {
		return ports.RoomConfig{}, ports.RoomUnknown, err
	}
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
	if err := s.mu.lock(ctx); err != nil {
		return 0, false, err
	}
	defer s.mu.Unlock()
	s.calls++
	r, ok := s.rooms[id]
	if !ok {
		return 0, false, domain.ErrNoRoom
	}
	r.closeDraw(now, seed)
	j, ok := r.users[user]
	if !ok {
		j = r.st.Joined
		r.st.Joined++
		r.users[user] = j
	}
	return j, r.st.Drawn, nil
}

// closeDraw mirrors the scripts' close_draw.
func (r *room) closeDraw(now time.Time, seed [domain.RoomSeedSize]byte) {
	if r.st.Drawn || domain.InDraw(r.cfg.Begin, now) {
		return
	}
	r.st.Drawn, r.st.N, r.st.Seed = true, r.st.Joined, seed
}

func (s *Rooms) Advance(ctx context.Context, id domain.VoucherID, now time.Time, seed [domain.RoomSeedSize]byte, after int64) (ports.RoomState, error) {
	now = now.Truncate(time.Millisecond)
	if err := s.mu.lock(ctx); err != nil {
		return ports.RoomState{}, err
	}
	defer s.mu.Unlock()
	s.calls++
	r, ok := s.rooms[id]
	if !ok {
		return ports.RoomState{}, domain.ErrNoRoom
	}
	r.closeDraw(now, seed)
	left := int64(-1) // what the gate has left to sell; -1 unknown
	paused := false   // a paused sale's line holds
	if s.gate != nil {
		if n, ok, err := s.gate.Stock(ctx, id); err == nil && ok {
			left = int64(n)
		}
		if p, ok := s.gate.(interface{ Paused(domain.VoucherID) bool }); ok {
			paused = p.Paused(id)
		}
	}
	if st := &r.st; st.Drawn {
		ttl := r.cfg.Rules.PassTTL()
		was := st.Expired
		for len(r.steps) > 0 && !r.steps[0].At.Add(ttl).After(now) {
			st.Expired = r.steps[0].Boundary
			r.steps = r.steps[1:]
		}
		live := len(r.live)
		maps.DeleteFunc(r.live, func(p int64, _ bool) bool { return p < st.Expired })
		st.Lapsed += st.Expired - was - int64(live-len(r.live))
		target := min(r.cfg.Rules.AdmitTarget(now.Sub(r.cfg.Begin)), st.Joined)
		// Passes outstanding never exceed what is left to sell, so each is
		// worth a unit.
		free := r.cfg.Cap
		if left >= 0 {
			free = left
		}
		free -= r.outstanding()
		if next := min(target, st.Boundary+max(free, 0)); next > st.Boundary && !paused {
			st.Boundary = next
			r.steps = append(r.steps, ports.RoomStep{Boundary: next, At: now})
		}
	}
	out := r.st
	out.Outstanding, out.Left = r.outstanding(), left
	i := sort.Search(len(r.steps), func(i int) bool { return r.steps[i].Boundary > after })
	out.Steps = append([]ports.RoomStep(nil), r.steps[i:]...)
	return out, nil
}

func (s *Rooms) Used(ctx context.Context, id domain.VoucherID, user domain.UserID) (bool, error) {
	return locked(ctx, &s.mu, func() (bool, error) {
		s.calls++
		r, ok := s.rooms[id]
		return ok && r.usedBy[user], nil
	})
}

func (s *Rooms) Use(ctx context.Context, id domain.VoucherID, user domain.UserID, position int64) error {
	if err := s.mu.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.calls++
	r, ok := s.rooms[id]
	if !ok || r.usedBy[user] {
		return nil
	}
	r.usedBy[user] = true
	r.st.Used++
	if position >= r.st.Expired && position < r.st.Boundary {
		r.live[position] = true
	}
	return nil
}

func (r *room) outstanding() int64 {
	return r.st.Boundary - r.st.Expired - int64(len(r.live))
}
