package application

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// RoomDirectory is one instance's view of the waiting rooms: which sales have
// one (kept: a sale's room never changes) and how far each line has moved (one
// store read per room per RoomRefresh, whatever the number of polls).
type RoomDirectory struct {
	store  ports.RoomStore
	clock  ports.Clock
	mu     sync.Mutex
	rooms  map[domain.VoucherID]*roomView
	none   map[domain.VoucherID]struct{}  // sales known to have no room
	absent map[domain.VoucherID]time.Time // no room and no sale, as of then
	flight map[domain.VoucherID]*lookup
}

// RoomRefresh is how stale an instance's view of a room may get.
const RoomRefresh = 250 * time.Millisecond

// roomAbsentTTL is how long "no room, and no sale either" is believed; a room
// is created domain.RoomLead before its sale begins, so no claim slips past.
const roomAbsentTTL = time.Second

// maxAbsent bounds both "no room" caches against claims of made-up ids.
const maxAbsent = 10_000

func put[V any](m map[domain.VoucherID]V, id domain.VoucherID, v V) {
	if len(m) >= maxAbsent {
		clear(m)
	}
	m[id] = v
}

type lookup struct {
	done chan struct{}
	view *roomView
	err  error
}

type roomView struct {
	id         domain.VoucherID
	cfg        ports.RoomConfig
	mu         sync.Mutex
	snap       roomSnapshot
	readAt     time.Time
	refreshing bool
}

// roomSnapshot is immutable once published: readers keep one without a lock.
type roomSnapshot struct {
	ports.RoomState
	draw domain.Draw
}

func NewRoomDirectory(store ports.RoomStore, clock ports.Clock) *RoomDirectory {
	mustHave("RoomDirectory", map[string]any{"store": store, "clock": clock})
	return &RoomDirectory{
		store: store, clock: clock,
		rooms:  make(map[domain.VoucherID]*roomView),
		none:   make(map[domain.VoucherID]struct{}),
		absent: make(map[domain.VoucherID]time.Time),
		flight: make(map[domain.VoucherID]*lookup),
	}
}

// randomSeed is a secret for the draw; the store keeps the first after it closes.
func randomSeed() [domain.RoomSeedSize]byte {
	var s [domain.RoomSeedSize]byte
	if _, err := rand.Read(s[:]); err != nil {
		panic("application: crypto/rand failed: " + err.Error()) // it does not, on any supported system
	}
	return s
}

// remember records a sale's room (or that it has none) and returns its view.
func (d *RoomDirectory) remember(v domain.Voucher) *roomView {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := v.Sale()
	if !s.HasRoom() {
		put(d.none, v.ID(), struct{}{})
		return nil
	}
	view, ok := d.rooms[v.ID()]
	if !ok {
		view = &roomView{id: v.ID(), cfg: ports.NewRoomConfig(s)}
		d.rooms[v.ID()] = view
	}
	delete(d.absent, v.ID())
	return view
}

// room finds a voucher's room (nil: none): from memory, or with one store read
// shared by every concurrent caller.
func (d *RoomDirectory) room(ctx context.Context, id domain.VoucherID) (*roomView, error) {
	d.mu.Lock()
	if v, ok := d.rooms[id]; ok {
		d.mu.Unlock()
		return v, nil
	}
	if _, ok := d.none[id]; ok {
		d.mu.Unlock()
		return nil, nil
	}
	now := d.clock.Now()
	if at, ok := d.absent[id]; ok && now.Sub(at) < roomAbsentTTL && !now.Before(at) {
		d.mu.Unlock()
		return nil, nil
	}
	if l, ok := d.flight[id]; ok {
		d.mu.Unlock()
		select {
		case <-l.done:
			return l.view, l.err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrBusy, ctx.Err())
		}
	}
	l := &lookup{done: make(chan struct{})}
	d.flight[id] = l
	d.mu.Unlock()
	// Detached: the waiters must not fail because the first caller hung up.
	cfg, found, err := d.store.Config(context.WithoutCancel(ctx), id)
	d.mu.Lock()
	delete(d.flight, id)
	switch {
	case err != nil:
		l.err = fmt.Errorf("%w: read waiting room of voucher %d: %w", ErrBusy, id, err)
	case found == ports.RoomPresent:
		l.view = &roomView{id: id, cfg: cfg}
		d.rooms[id] = l.view
	case found == ports.RoomAbsent:
		put(d.none, id, struct{}{})
	default:
		put(d.absent, id, now)
	}
	d.mu.Unlock()
	close(l.done)
	return l.view, l.err
}

// state is the room as of at most RoomRefresh ago; the caller that finds it
// stale reads the store while the others answer from the view they have.
func (d *RoomDirectory) state(ctx context.Context, v *roomView, drawn bool) (roomSnapshot, error) {
	now := d.clock.Now()
	v.mu.Lock()
	fresh := !v.readAt.IsZero() && now.Sub(v.readAt) < RoomRefresh && !now.Before(v.readAt)
	if stale := drawn && !v.snap.Drawn; !stale && (fresh || (v.refreshing && !v.readAt.IsZero())) {
		s := v.snap
		v.mu.Unlock()
		return s, nil
	}
	v.refreshing = true
	after := v.snap.Boundary
	if v.readAt.IsZero() {
		after = -1
	}
	v.mu.Unlock()
	st, err := d.store.Advance(ctx, v.id, now, randomSeed(), after)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.refreshing = false
	if err != nil {
		if !v.readAt.IsZero() && !errors.Is(err, domain.ErrNoRoom) {
			// A stale view is better than none: the line only moves on.
			return v.snap, nil
		}
		return roomSnapshot{}, fmt.Errorf("read waiting room of voucher %d: %w", v.id, err)
	}
	v.snap = merge(v.snap, st, after)
	v.readAt = now
	return v.snap, nil
}

// merge keeps the old steps still live, then the new, none at or below Expired.
func merge(old roomSnapshot, st ports.RoomState, after int64) roomSnapshot {
	var steps []ports.RoomStep // never old's nor st's: a published snapshot is read without a lock
	if after >= 0 {
		steps = slices.DeleteFunc(slices.Clone(old.Steps), func(s ports.RoomStep) bool { return s.Boundary > after })
	}
	steps = append(steps, st.Steps...)
	st.Steps = slices.DeleteFunc(steps, func(s ports.RoomStep) bool { return s.Boundary <= st.Expired })
	n := roomSnapshot{RoomState: st}
	if st.Drawn {
		n.draw = domain.NewDraw(st.Seed, st.N)
	}
	return n
}

// admittedAt is when position p was admitted, if its pass may still be live.
func (s roomSnapshot) admittedAt(p int64) (time.Time, bool) {
	if p < s.Expired || p >= s.Boundary {
		return time.Time{}, false
	}
	i := sort.Search(len(s.Steps), func(i int) bool { return s.Steps[i].Boundary > p })
	if i == len(s.Steps) {
		return time.Time{}, false
	}
	return s.Steps[i].At, true
}

// RoomFigures is one room as this instance last read it from the store.
type RoomFigures struct {
	Voucher                   domain.VoucherID
	Joined, Admitted, Waiting int64 // Waiting: joined, not admitted yet
	Used, Lapsed              int64 // passes used, and expired unused
	Drawn                     bool
	ReadAt                    time.Time
}

// Read gives a sale's room as of at most RoomRefresh ago; false: it has none.
func (d *RoomDirectory) Read(ctx context.Context, v domain.Voucher) (RoomFigures, bool, error) {
	if !v.Sale().HasRoom() {
		return RoomFigures{}, false, nil
	}
	view := d.remember(v)
	if _, err := d.state(ctx, view, false); err != nil {
		return RoomFigures{}, false, err
	}
	view.mu.Lock()
	defer view.mu.Unlock()
	return view.figures(), true, nil
}

// figures: v.mu held.
func (v *roomView) figures() RoomFigures {
	s := v.snap
	return RoomFigures{Voucher: v.id, Joined: s.Joined, Admitted: s.Boundary,
		Waiting: max(s.Joined-s.Boundary, 0), Used: s.Used, Lapsed: s.Lapsed, Drawn: s.Drawn, ReadAt: v.readAt}
}

// Figures lists the rooms read here whose sale has not ended, by voucher id.
func (d *RoomDirectory) Figures(now time.Time) []RoomFigures {
	d.mu.Lock()
	views := make([]*roomView, 0, len(d.rooms))
	for _, v := range d.rooms {
		if !domain.Ended(v.cfg.End, now) {
			views = append(views, v)
		}
	}
	d.mu.Unlock()
	out := make([]RoomFigures, 0, len(views))
	for _, v := range views {
		v.mu.Lock()
		if f := v.figures(); !f.ReadAt.IsZero() {
			out = append(out, f)
		}
		v.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b RoomFigures) int { return cmp.Compare(a.Voucher, b.Voucher) })
	return out
}
