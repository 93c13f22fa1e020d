package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Gate is the in-memory StockGate: it decides like the Redis gate's scripts, under one mutex,
// with the window checked against its clock.
type Gate struct {
	clock   ports.Clock
	reclaim bool
	mu      mutex
	sales   map[domain.VoucherID]*gateSale
}

// WithReclaimAfterCancel sets whether Return frees a cancelled order's buyer to claim again
// (otherwise it forfeits the place), and returns g.
func (g *Gate) WithReclaimAfterCancel(on bool) *Gate {
	g.reclaim = on
	return g
}

type gateSale struct {
	sale  domain.Sale // its window; its stock is the initial one
	stock int         // what is left to reserve
	// buyers holds the mark of each place's order (negative once forfeited), as the Redis buyers hash;
	// keyed by place, not by user, so a new buyer costs the claim no allocation (claimAllocBudget).
	buyers   map[place]domain.OrderID
	returned map[domain.OrderID]bool // the orders Return gave back, which Heal never restores
}

func newGateSale(s domain.Sale, returned map[domain.OrderID]bool) *gateSale {
	return &gateSale{sale: s, stock: s.Stock(), buyers: map[place]domain.OrderID{}, returned: returned}
}

func NewGate(clock ports.Clock) *Gate {
	return &Gate{clock: clock, sales: make(map[domain.VoucherID]*gateSale)}
}

func (g *Gate) Preheat(ctx context.Context, v domain.Voucher) error {
	return g.mu.do(ctx, func() error {
		if err := v.CheckGateable(); err != nil {
			return fmt.Errorf("preheat: %w", err)
		}
		s := v.Sale()
		cur, ok := g.sales[v.ID()]
		switch {
		case !ok:
			g.sales[v.ID()] = newGateSale(s, map[domain.OrderID]bool{})
		case !cur.sale.Begin().Equal(s.Begin()) || !cur.sale.End().Equal(s.End()):
			return fmt.Errorf("preheat voucher %d: the gate holds another sale's window under this id", v.ID())
		}
		return nil // an existing state may hold reservations: it stays, as in Redis
	})
}

func (g *Gate) Missing(ctx context.Context, ids []domain.VoucherID) ([]domain.VoucherID, error) {
	return locked(ctx, &g.mu, func() ([]domain.VoucherID, error) {
		var missing []domain.VoucherID
		for _, id := range ids {
			if g.sales[id] == nil {
				missing = append(missing, id)
			}
		}
		return missing, nil
	})
}

func (g *Gate) Counts(ctx context.Context, ids []domain.VoucherID) (map[domain.VoucherID]ports.GateCount, error) {
	return locked(ctx, &g.mu, func() (map[domain.VoucherID]ports.GateCount, error) {
		out := make(map[domain.VoucherID]ports.GateCount, len(ids))
		for _, id := range ids {
			if s, ok := g.sales[id]; ok {
				out[id] = ports.GateCount{Buyers: len(s.buyers), Stock: s.stock}
			}
		}
		return out, nil
	})
}

func (g *Gate) Heal(ctx context.Context, v domain.Voucher, orders []domain.VoucherOrder) (ports.Healed, error) {
	return locked(ctx, &g.mu, func() (h ports.Healed, err error) {
		if _, err := domain.BuyerMarks(v, orders); err != nil {
			return h, fmt.Errorf("heal: %w", err)
		}
		s, ok := g.sales[v.ID()]
		for _, o := range orders {
			if !ok || (o.HoldsUnit() && s.returned[o.ID()]) || !s.mark(o) {
				continue
			}
			h.Restored++
			switch {
			case !o.HoldsUnit(): // a forfeited place: its mark takes no unit
			case s.stock > 0:
				s.stock--
				h.Retaken++
			default:
				h.Oversold++
			}
		}
		return h, nil
	})
}

// Lose undoes a reservation as a Redis that lost the claim's write would; for tests of the repair.
func (g *Gate) Lose(o domain.VoucherOrder) { _ = g.Release(context.Background(), o, true) }

// Forget drops a voucher's state, as a Redis that lost its data would.
func (g *Gate) Forget(id domain.VoucherID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.sales, id)
}

func (g *Gate) Restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) (bool, error) {
	return g.restore(ctx, v, buyers, false)
}

// Overwrite replaces the voucher's state whatever it holds.
func (g *Gate) Overwrite(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) error {
	_, err := g.restore(ctx, v, buyers, true)
	return err
}

func (g *Gate) restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder, force bool) (bool, error) {
	return locked(ctx, &g.mu, func() (bool, error) {
		if err := v.CheckGateable(); err != nil {
			return false, fmt.Errorf("restore: %w", err)
		}
		if _, err := domain.BuyerMarks(v, buyers); err != nil {
			return false, fmt.Errorf("restore: %w", err)
		}
		returned := map[domain.OrderID]bool{}
		if cur, ok := g.sales[v.ID()]; ok {
			if !force {
				return false, nil
			}
			returned = cur.returned
		}
		fresh := newGateSale(v.Sale(), returned)
		for _, o := range buyers {
			fresh.mark(o)
		}
		g.sales[v.ID()] = fresh
		return true, nil
	})
}

func (g *Gate) Reserve(ctx context.Context, o domain.VoucherOrder) error {
	now := g.clock.Now()
	return g.mu.do(ctx, func() error {
		s, ok := g.sales[o.VoucherID()]
		if !ok {
			return domain.ErrVoucherNotFound
		}
		// A claim resent after its reply was lost finds its own mark and is taken,
		// whatever changed since but the start (the claim scripts' rule).
		_, held := s.find(o.UserID(), o.ID())
		switch err := s.sale.Check(now, s.stock); {
		case errors.Is(err, domain.ErrNotStarted):
			return err
		case held:
			return nil
		case err != nil:
			return err
		case !s.mark(o):
			return domain.ErrAlreadyClaimed
		}
		s.stock--
		return nil
	})
}

func (g *Gate) Release(ctx context.Context, o domain.VoucherOrder, restoreStock bool) error {
	return g.mu.do(ctx, func() error {
		if s, ok := g.sales[o.VoucherID()]; ok && s.unmark(o, true) && restoreStock {
			s.stock++
		}
		return nil
	})
}

// Return releases each order as Release(o, true) would, and remembers it.
func (g *Gate) Return(ctx context.Context, orders []domain.VoucherOrder) error {
	return g.mu.do(ctx, func() error {
		for _, o := range orders {
			if s, ok := g.sales[o.VoucherID()]; ok {
				s.returned[o.ID()] = true
				if s.unmark(o, g.reclaim) {
					s.stock++
				}
			}
		}
		return nil
	})
}

// Apply carries v's end, pause and added units to a sale the gate holds, as controls.lua:
// each added unit is taken once (the sale keeps the total).
func (g *Gate) Apply(ctx context.Context, v domain.Voucher) error {
	return g.mu.do(ctx, func() error {
		if s, ok := g.sales[v.ID()]; ok {
			old, want := s.sale, v.Sale()
			added := max(old.Added(), want.Added())
			s.stock += added - old.Added()
			s.sale = old.WithStoredWindow(old.Begin(), want.End()).WithStoredControls(added, want.Paused())
		}
		return nil
	})
}

// Queued is QueuedByID for the order of user only.
func (g *Gate) Queued(ctx context.Context, user domain.UserID, id domain.OrderID) (domain.VoucherOrder, bool, error) {
	o, ok, err := g.QueuedByID(ctx, id)
	if !ok || o.UserID() != user {
		return domain.VoucherOrder{}, false, err
	}
	return o, true, nil
}

// QueuedByID finds the order whose mark a place holds, whoever claimed it.
func (g *Gate) QueuedByID(ctx context.Context, id domain.OrderID) (domain.VoucherOrder, bool, error) {
	if err := g.mu.lock(ctx); err != nil {
		return domain.VoucherOrder{}, false, err
	}
	defer g.mu.Unlock()
	for vid, s := range g.sales {
		for p, held := range s.buyers {
			if held == id {
				o, err := domain.NewVoucherOrder(id, p.user, vid)
				return o, err == nil, err
			}
		}
	}
	return domain.VoucherOrder{}, false, nil
}

// Paused tells whether the voucher's sale is paused (the rooms read it).
func (g *Gate) Paused(id domain.VoucherID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.sales[id]
	return ok && s.sale.Paused()
}

func (g *Gate) Stock(ctx context.Context, id domain.VoucherID) (int, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.sales[id]; ok {
		return s.stock, true, nil
	}
	return 0, false, nil
}

func (g *Gate) Buyers(ctx context.Context, id domain.VoucherID) (map[domain.OrderID]domain.UserID, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[domain.OrderID]domain.UserID)
	if s, ok := g.sales[id]; ok {
		for p, o := range s.buyers {
			if o > 0 {
				out[o] = p.user
			}
		}
	}
	return out, nil
}

// place is a user's n-th place in a sale (redisschema.PlaceField).
type place struct {
	user domain.UserID
	n    int
}

// find is the place of user u that holds mark, if any (a mark is never a missing place's 0).
func (s *gateSale) find(u domain.UserID, mark domain.OrderID) (place, bool) {
	for n := 1; n <= s.sale.LimitPerUser(); n++ {
		if p := (place{u, n}); s.buyers[p] == mark {
			return p, true
		}
	}
	return place{}, false
}

// mark gives o the first free place of its user, unless none is or one already holds o,
// held or forfeited (the claim and heal scripts' rule).
func (s *gateSale) mark(o domain.VoucherOrder) bool {
	var first place
	for n := s.sale.LimitPerUser(); n >= 1; n-- {
		p := place{o.UserID(), n}
		switch mark, taken := s.buyers[p]; {
		case !taken:
			first = p
		case mark == o.ID() || mark == -o.ID():
			return false
		}
	}
	if first.n > 0 {
		s.buyers[first] = o.Mark()
	}
	return first.n > 0
}

// unmark frees o's place, or forfeits it (it keeps counting toward the limit, its order negated),
// and reports whether a place held o. Unlike in Redis a gap below the user's last place is harmless.
func (s *gateSale) unmark(o domain.VoucherOrder, free bool) bool {
	p, ok := s.find(o.UserID(), o.ID())
	switch {
	case !ok:
	case free:
		delete(s.buyers, p)
	default:
		s.buyers[p] = -o.ID()
	}
	return ok
}

// Rooms is the in-memory RoomStore: the Redis room's scripts step by step, under one mutex.
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

// NewRooms: gate, if not nil, tells Config that a sale without a room exists (as the Redis room reads the gate's key).
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
	return s.mu.do(ctx, func() error {
		switch {
		case !v.Sale().HasRoom():
			return nil
		case v.ID() <= 0:
			return fmt.Errorf("open room: voucher has no id yet")
		}
		s.calls++
		if s.rooms[v.ID()] == nil {
			s.rooms[v.ID()] = &room{cfg: ports.NewRoomConfig(v.Sale()),
				users: map[domain.UserID]int64{}, usedBy: map[domain.UserID]bool{}, live: map[int64]bool{}}
		}
		return nil
	})
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
	if !r.st.Drawn && !domain.InDraw(r.cfg.Begin, now) {
		r.st.Drawn, r.st.N, r.st.Seed = true, r.st.Joined, seed
	}
}

func (s *Rooms) Advance(ctx context.Context, id domain.VoucherID, now time.Time, seed [domain.RoomSeedSize]byte, after int64) (ports.RoomState, error) {
	now = now.Truncate(time.Millisecond)
	return locked(ctx, &s.mu, func() (ports.RoomState, error) {
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
			// Passes outstanding never exceed what is left to sell, so each is worth a unit.
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
	})
}

func (s *Rooms) Used(ctx context.Context, id domain.VoucherID, user domain.UserID) (bool, error) {
	return locked(ctx, &s.mu, func() (bool, error) {
		s.calls++
		r, ok := s.rooms[id]
		return ok && r.usedBy[user], nil
	})
}

func (s *Rooms) Use(ctx context.Context, id domain.VoucherID, user domain.UserID, position int64) error {
	return s.mu.do(ctx, func() error {
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
	})
}

func (r *room) outstanding() int64 { return r.st.Boundary - r.st.Expired - int64(len(r.live)) }
