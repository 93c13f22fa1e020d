package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Gate is the in-memory StockGate. It decides like the Redis gate's claim
// script (window, then stock, then duplicate), under one mutex instead of one
// script, with the window checked against the clock it was given.
type Gate struct {
	clock ports.Clock

	// reclaim: Return frees the buyer's place (the Redis gates'
	// ReclaimAfterCancel); otherwise it forfeits the place.
	reclaim bool

	mu    mutex
	sales map[domain.VoucherID]*gateSale
}

// WithReclaimAfterCancel sets whether Return frees a cancelled order's
// buyer to claim again, and returns g. Set it before g is shared.
func (g *Gate) WithReclaimAfterCancel(on bool) *Gate {
	g.reclaim = on
	return g
}

type gateSale struct {
	sale  domain.Sale // its window; its stock is the initial one
	stock int         // what is left to reserve
	// buyers is the users' places, as the Redis gate's buyers hash holds
	// them (one field per place): the mark of the order holding each
	// (domain.VoucherOrder.Mark: negative once forfeited). A map of places,
	// not of each user's slice of marks, so a new buyer costs the claim no
	// allocation (application's claimAllocBudget).
	buyers map[place]domain.OrderID
	// returned holds the orders Return gave back, which Heal never puts
	// back (the Redis gate's returned set).
	returned map[domain.OrderID]bool
}

var (
	_ ports.StockGate    = (*Gate)(nil)
	_ ports.GateControls = (*Gate)(nil)
	_ ports.GateAudit    = (*Gate)(nil)
	_ ports.GateProbe    = (*Gate)(nil)
	_ ports.OrderIndex   = (*Gate)(nil)
)

// NewGate panics on a nil clock, a wiring mistake.
func NewGate(clock ports.Clock) *Gate {
	if clock == nil {
		panic("memory: NewGate needs a non-nil clock")
	}
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
		// Like the Redis gate: an existing state may hold reservations, and
		// one of another sale's window is an operator's problem.
		if !cur.sale.Begin().Equal(s.Begin()) || !cur.sale.End().Equal(s.End()) {
			return fmt.Errorf("preheat voucher %d: the gate holds another sale's window under this id", v.ID())
		}
		return nil
	}
	g.sales[v.ID()] = &gateSale{
		sale: s, stock: s.Stock(), buyers: map[place]domain.OrderID{}, returned: map[domain.OrderID]bool{},
	}
	return nil
}

func (g *Gate) Missing(ctx context.Context, ids []domain.VoucherID) ([]domain.VoucherID, error) {
	if err := g.mu.lock(ctx); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
	var missing []domain.VoucherID
	for _, id := range ids {
		if _, ok := g.sales[id]; !ok {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

func (g *Gate) Counts(ctx context.Context, ids []domain.VoucherID) (map[domain.VoucherID]ports.GateCount, error) {
	if err := g.mu.lock(ctx); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
	out := make(map[domain.VoucherID]ports.GateCount, len(ids))
	for _, id := range ids {
		if s, ok := g.sales[id]; ok {
			out[id] = ports.GateCount{Buyers: len(s.buyers), Stock: s.stock}
		}
	}
	return out, nil
}

// Heal decides like the Redis gate's heal script, under the mutex.
func (g *Gate) Heal(ctx context.Context, v domain.Voucher, orders []domain.VoucherOrder) (ports.Healed, error) {
	if err := g.mu.lock(ctx); err != nil {
		return ports.Healed{}, err
	}
	defer g.mu.Unlock()
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
}

// Lose undoes a reservation as a Redis that lost the claim's write would
// (a restart without persistence, a failover to a replica that lagged): the
// mark is gone and the unit is back, whatever became of the order; for tests
// of the repair. It is Release(o, true), which a test need not check.
func (g *Gate) Lose(o domain.VoucherOrder) {
	_ = g.Release(context.Background(), o, true)
}

// Forget drops a voucher's state, as a Redis that lost its data would; for
// tests of the repair.
func (g *Gate) Forget(id domain.VoucherID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.sales, id)
}

func (g *Gate) Restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) (bool, error) {
	return g.restore(ctx, v, buyers, false)
}

// Overwrite replaces the voucher's state whatever it holds, like the Redis gate's.
func (g *Gate) Overwrite(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) error {
	_, err := g.restore(ctx, v, buyers, true)
	return err
}

func (g *Gate) restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder, force bool) (bool, error) {
	if err := g.mu.lock(ctx); err != nil {
		return false, err
	}
	defer g.mu.Unlock()
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
		returned = cur.returned // an Overwrite keeps what was given back
	}
	fresh := &gateSale{sale: s, stock: s.Stock(), buyers: map[place]domain.OrderID{}, returned: returned}
	for _, o := range buyers {
		fresh.mark(o) // BuyerMarks has checked each has a place
	}
	g.sales[v.ID()] = fresh
	return true, nil
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
	// A claim resent after its reply was lost finds its own mark: taken,
	// whatever changed since (ended, paused, sold out), and nothing changes
	// (the claim scripts' rule). Only a sale not started holds no claim.
	_, held := s.find(o.UserID(), o.ID())
	switch err := s.sale.Check(now, s.stock); {
	case errors.Is(err, domain.ErrNotStarted):
		return err
	case held:
		return nil
	case err != nil: // the claim script's order: window, pause, stock, then duplicate
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

// Return releases each order as Release(o, true) and remembers it, under
// the mutex (the Redis gate's return script).
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

// Apply carries v's end, pause and added units to a sale the gate holds,
// as the Redis gates' controls.lua: each added unit is taken once (the
// sale keeps the total taken), and a voucher the gate does not hold stays
// absent.
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

// Queued is QueuedByID for the order of user only, as the Redis gate's.
func (g *Gate) Queued(ctx context.Context, user domain.UserID, id domain.OrderID) (domain.VoucherOrder, bool, error) {
	o, ok, err := g.QueuedByID(ctx, id)
	if !ok || o.UserID() != user {
		return domain.VoucherOrder{}, false, err
	}
	return o, true, nil
}

// QueuedByID finds the order whose mark a place holds, whoever claimed it
// (ports.OrderIndex).
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

// place is a user's n-th place in a sale (the Redis gate's
// redisschema.PlaceField).
type place struct {
	user domain.UserID
	n    int
}

// find is the place of user u that holds mark, if any (a mark is never 0,
// the missing place's zero: order ids are positive).
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

// unmark frees o's place (free), or forfeits it: the place keeps counting
// toward the user's limit and names its order negated. It reports whether a
// place held o. A freed place may leave a gap below the user's last: unlike
// the Redis gate's unplace, nothing here reads the places in order.
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
