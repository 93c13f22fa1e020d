package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Gate is the in-memory StockGate. It decides like the Redis gate's scripts,
// under one mutex, with the window checked against its clock.
type Gate struct {
	clock   ports.Clock
	reclaim bool
	mu      mutex
	sales   map[domain.VoucherID]*gateSale
}

// WithReclaimAfterCancel sets whether Return frees a cancelled order's buyer
// to claim again (otherwise it forfeits the place), and returns g.
func (g *Gate) WithReclaimAfterCancel(on bool) *Gate {
	g.reclaim = on
	return g
}

type gateSale struct {
	sale  domain.Sale // its window; its stock is the initial one
	stock int         // what is left to reserve
	// buyers holds the mark of the order in each place (negative once
	// forfeited), as the Redis gate's buyers hash. Keyed by place, not by
	// user, so a new buyer costs the claim no allocation (claimAllocBudget).
	buyers map[place]domain.OrderID
	// returned holds the orders Return gave back, which Heal never restores.
	returned map[domain.OrderID]bool
}

var (
	_ ports.StockGate    = (*Gate)(nil)
	_ ports.GateControls = (*Gate)(nil)
	_ ports.GateAudit    = (*Gate)(nil)
	_ ports.GateProbe    = (*Gate)(nil)
	_ ports.OrderIndex   = (*Gate)(nil)
)

func NewGate(clock ports.Clock) *Gate {
	return &Gate{clock: clock, sales: make(map[domain.VoucherID]*gateSale)}
}

func (g *Gate) Preheat(ctx context.Context, v domain.Voucher) error {
	if err := g.mu.lock(ctx); err != nil {
		return err
	}
	defer g.mu.Unlock()
	if err := v.CheckGateable(); err != nil {
		return fmt.Errorf("preheat: %w", err)
	}
	s := v.Sale()
	if cur, ok := g.sales[v.ID()]; ok {
		// An existing state may hold reservations: it stays, as in Redis.
		if !cur.sale.Begin().Equal(s.Begin()) || !cur.sale.End().Equal(s.End()) {
			return fmt.Errorf("preheat voucher %d: the gate holds another sale's window under this id", v.ID())
		}
		return nil
	}
	g.sales[v.ID()] = &gateSale{sale: s, stock: s.Stock(), buyers: map[place]domain.OrderID{}, returned: map[domain.OrderID]bool{}}
	return nil
}

func (g *Gate) Missing(ctx context.Context, ids []domain.VoucherID) ([]domain.VoucherID, error) {
	return locked(ctx, &g.mu, func() ([]domain.VoucherID, error) {
		var missing []domain.VoucherID
		for _, id := range ids {
			if _, ok := g.sales[id]; !ok {
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
	return locked(ctx, &g.mu, func() (ports.Healed, error) {
		if _, err := domain.BuyerMarks(v, orders); err != nil {
			return ports.Healed{}, fmt.Errorf("heal: %w", err)
		}
		var h ports.Healed
		s, ok := g.sales[v.ID()]
		if !ok {
			return h, nil
		}
		for _, o := range orders {
			if (o.HoldsUnit() && s.returned[o.ID()]) || !s.mark(o) {
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

// Lose undoes a reservation as a Redis that lost the claim's write would;
// for tests of the repair.
func (g *Gate) Lose(o domain.VoucherOrder) {
	_ = g.Release(context.Background(), o, true)
}

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
		s := v.Sale()
		returned := map[domain.OrderID]bool{}
		if cur, ok := g.sales[v.ID()]; ok {
			if !force {
				return false, nil
			}
			returned = cur.returned
		}
		fresh := &gateSale{sale: s, stock: s.Stock(), buyers: map[place]domain.OrderID{}, returned: returned}
		for _, o := range buyers {
			fresh.mark(o)
		}
		g.sales[v.ID()] = fresh
		return true, nil
	})
}

func (g *Gate) Reserve(ctx context.Context, o domain.VoucherOrder) error {
	now := g.clock.Now()
	if err := g.mu.lock(ctx); err != nil {
		return err
	}
	defer g.mu.Unlock()
	s, ok := g.sales[o.VoucherID()]
	if !ok {
		return domain.ErrVoucherNotFound
	}
	// A claim resent after its reply was lost finds its own mark and is
	// taken, whatever changed since but the start (the claim scripts' rule).
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
}

func (g *Gate) Release(ctx context.Context, o domain.VoucherOrder, restoreStock bool) error {
	if err := g.mu.lock(ctx); err != nil {
		return err
	}
	defer g.mu.Unlock()
	if s, ok := g.sales[o.VoucherID()]; ok && s.unmark(o, true) && restoreStock {
		s.stock++
	}
	return nil
}

// Return releases each order as Release(o, true) would, and remembers it.
func (g *Gate) Return(ctx context.Context, orders []domain.VoucherOrder) error {
	if err := g.mu.lock(ctx); err != nil {
		return err
	}
	defer g.mu.Unlock()
	for _, o := range orders {
		s, ok := g.sales[o.VoucherID()]
		if !ok {
			continue
		}
		s.returned[o.ID()] = true
		if s.unmark(o, g.reclaim) {
			s.stock++
		}
	}
	return nil
}

// Apply carries v's end, pause and added units to a sale the gate holds, as
// controls.lua: each added unit is taken once (the sale keeps the total).
func (g *Gate) Apply(ctx context.Context, v domain.Voucher) error {
	if err := g.mu.lock(ctx); err != nil {
		return err
	}
	defer g.mu.Unlock()
	s, ok := g.sales[v.ID()]
	if !ok {
		return nil
	}
	old, want := s.sale, v.Sale()
	added := max(old.Added(), want.Added())
	s.stock += added - old.Added()
	s.sale = old.WithStoredWindow(old.Begin(), want.End()).WithStoredControls(added, want.Paused())
	return nil
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
	s, ok := g.sales[id]
	if !ok {
		return 0, false, nil
	}
	return s.stock, true, nil
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

// find is the place of user u that holds mark, if any (order ids are
// positive: a mark is never a missing place's 0).
func (s *gateSale) find(u domain.UserID, mark domain.OrderID) (place, bool) {
	for n := 1; n <= s.sale.LimitPerUser(); n++ {
		if p := (place{u, n}); s.buyers[p] == mark {
			return p, true
		}
	}
	return place{}, false
}

// mark gives o the first free place of its user, unless none is or one
// already holds o, held or forfeited (the claim and heal scripts' rule).
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

// unmark frees o's place, or forfeits it: the place keeps counting toward
// the user's limit and names its order negated. It reports whether a place
// held o. Unlike in Redis a gap below the user's last place is harmless here.
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
