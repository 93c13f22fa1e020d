package application

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// RoomPhase is where a user stands in a waiting room.
type RoomPhase string

const (
	RoomDrawPending RoomPhase = "pre_queue" // the place is drawn at the begin
	RoomWaiting     RoomPhase = "waiting"   // in line, Ahead places in front
	RoomAdmitted    RoomPhase = "admitted"  // the pass is valid until PassExpires
	RoomPassExpired RoomPhase = "expired"   // the pass was not used in time
	RoomSoldOut     RoomPhase = "sold_out"  // nothing left and no pass outstanding, until a unit comes back
)

// RoomStatus is what a join or a poll answers.
type RoomStatus struct {
	Ticket      string // the user's signed place, to poll with
	Phase       RoomPhase
	Position    int64         // the place in line (1 = first) once drawn; 0 before
	Ahead       int64         // places in front not admitted yet
	Joined      int64         // how many have joined
	Wait        time.Duration // estimated (before the draw: begin + half the pre-queue at the rate)
	DrawAt      time.Time     // the sale's begin, when the pre-queue is drawn
	Pass        string        // once admitted
	PassExpires time.Time
	PollAfter   time.Duration // 0: the answer is final or the pass in hand
}

func (st RoomStatus) InDraw() bool { return st.Phase == RoomDrawPending }

// WaitingRoom lines users up (Join), tells them where they stand and hands
// them their pass (Poll), and checks and spends that pass in the claim (Check,
// Used). A poll reads only the signed ticket and this instance's view.
type WaitingRoom struct {
	dir    *RoomDirectory
	signer *RoomSigner
}

func NewWaitingRoom(dir *RoomDirectory, signer *RoomSigner) *WaitingRoom {
	mustHave("WaitingRoom", "dir", dir, "signer", signer)
	return &WaitingRoom{dir: dir, signer: signer}
}

// Join gives user one place in the line (again: the same place).
func (h *WaitingRoom) Join(ctx context.Context, voucher domain.VoucherID, user domain.UserID) (RoomStatus, error) {
	v, err := h.dir.room(ctx, voucher)
	if err != nil || v == nil {
		return RoomStatus{}, cmp.Or[error](err, domain.ErrNoRoom)
	}
	now := h.dir.clock.Now()
	switch {
	case now.Before(v.cfg.Rules.Opens(v.cfg.Begin)):
		return RoomStatus{}, domain.ErrRoomNotOpen
	case domain.Ended(v.cfg.End, now):
		return RoomStatus{}, domain.ErrEnded
	}
	j, drawn, err := h.dir.store.Join(ctx, voucher, user, now, randomSeed())
	if err != nil {
		if domain.IsRefusal(err) {
			return RoomStatus{}, err
		}
		return RoomStatus{}, fmt.Errorf("join waiting room of voucher %d: %w: %w", voucher, ErrBusy, err)
	}
	return h.status(ctx, v, roomToken{voucher: voucher, user: user, n: j}, drawn)
}

// Poll answers from the instance's view of the room; a ticket that is not
// the user's for this voucher is domain.ErrNotInRoom.
func (h *WaitingRoom) Poll(ctx context.Context, voucher domain.VoucherID, user domain.UserID, ticket string) (RoomStatus, error) {
	t, err := h.signer.open(kindTicket, ticket, voucher, user)
	if err != nil {
		return RoomStatus{}, domain.ErrNotInRoom
	}
	v, err := h.dir.room(ctx, voucher)
	if err != nil || v == nil {
		return RoomStatus{}, cmp.Or[error](err, domain.ErrNoRoom)
	}
	return h.status(ctx, v, t, false)
}

// status answers where t stands; drawn: the draw is known closed, so a view
// read before it is read again.
func (h *WaitingRoom) status(ctx context.Context, v *roomView, t roomToken, drawn bool) (RoomStatus, error) {
	snap, err := h.dir.state(ctx, v, drawn)
	if err != nil {
		return RoomStatus{}, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	now := h.dir.clock.Now()
	rate := int64(v.cfg.Rules.AdmitPerSecond())
	st := RoomStatus{Ticket: h.signer.sign(kindTicket, t), Joined: max(snap.Joined, t.n+1), DrawAt: v.cfg.Begin}
	if !snap.Drawn {
		st.Phase = RoomDrawPending
		st.Wait = max(v.cfg.Begin.Sub(now), 0) + perRate(st.Joined/2, rate)
		st.PollAfter = pollAfter(v.cfg.Begin.Sub(now))
		return st, nil
	}
	p := snap.draw.Place(t.n)
	st.Position = p + 1
	if p >= snap.Boundary {
		if snap.Left == 0 { // passes never exceed what is left: none outstanding
			st.Phase = RoomSoldOut
			return st, nil
		}
		st.Phase = RoomWaiting
		st.Ahead = p - snap.Boundary
		st.Wait = estimateWait(snap.RoomState, st.Ahead, rate, v.cfg.Rules.PassTTL())
		st.PollAfter = pollAfter(st.Wait / 4)
		return st, nil
	}
	at, live := snap.admittedAt(p)
	exp := passExpiry(at, v.cfg.Rules.PassTTL())
	if !live || !now.Before(exp) {
		st.Phase = RoomPassExpired
		return st, nil
	}
	st.Phase = RoomAdmitted
	st.PassExpires = exp
	st.Pass = h.signer.sign(kindPass, roomToken{voucher: t.voucher, user: t.user, n: p, exp: exp.UnixMilli()})
	return st, nil
}

// passExpiry is a little before the room lets the place lapse (at + ttl, by
// another instance's clock, at most passGrace apart).
func passExpiry(at time.Time, ttl time.Duration) time.Time {
	return at.Add(ttl - min(passGrace, ttl/5))
}

const passGrace = time.Second

// pollAfter: not before the view can have moved, not later than 5 s.
func pollAfter(d time.Duration) time.Duration {
	return min(max(d, RoomRefresh), 5*time.Second)
}

// estimateWait: at the rate while units are free beyond the passes outstanding,
// then one pass lifetime per round of lapses, at the lapse share seen so far.
func estimateWait(st ports.RoomState, ahead, rate int64, ttl time.Duration) time.Duration {
	if st.Left < 0 {
		return perRate(ahead+1, rate) // the room cannot read the stock (a split voucher)
	}
	free := max(st.Left-st.Outstanding, 0)
	if ahead < free {
		return perRate(ahead+1, rate)
	}
	need := ahead + 1 - free
	lapse := float64(st.Lapsed+1) / float64(st.Lapsed+st.Used+2)
	perRound := max(float64(st.Outstanding)*lapse, 1)
	rounds := time.Duration(math.Ceil(float64(need) / perRound))
	return perRate(free, rate) + rounds*ttl
}

func perRate(n, rate int64) time.Duration {
	if n <= 0 || rate <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second / time.Duration(rate)
}

// Check returns the position the pass admits (-1: a sale without a room) once its
// signature and one store read show it unspent; a pass admits one order (domain.ErrAlreadyClaimed).
func (h *WaitingRoom) Check(ctx context.Context, voucher domain.VoucherID, user domain.UserID, pass PassSource) (int64, error) {
	if v, err := h.dir.room(ctx, voucher); v == nil {
		return -1, err // err nil: a sale without a room
	}
	if pass == nil {
		return -1, domain.ErrPassRequired
	}
	p, err := h.signer.open(kindPass, pass.RoomPass(), voucher, user)
	if err != nil {
		return -1, domain.ErrPassRequired
	}
	if !h.dir.clock.Now().Before(time.UnixMilli(p.exp)) {
		return -1, domain.ErrPassExpired
	}
	used, err := h.dir.store.Used(ctx, voucher, user)
	if err != nil {
		return -1, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if used {
		return -1, domain.ErrAlreadyClaimed
	}
	return p.n, nil
}

// Used records the pass for position (Check's) spent, in one round trip.
func (h *WaitingRoom) Used(ctx context.Context, voucher domain.VoucherID, user domain.UserID, position int64) error {
	if err := h.dir.store.Use(ctx, voucher, user, position); err != nil {
		return fmt.Errorf("mark pass of voucher %d used: %w", voucher, err)
	}
	return nil
}

// RoomGate is the StockGate that opens a sale's waiting room before its gate
// (Preheat, Restore), so no instance takes a room sale for one without.
type RoomGate struct {
	ports.StockGate
	dir *RoomDirectory
}

func NewRoomGate(gate ports.StockGate, dir *RoomDirectory) *RoomGate {
	mustHave("RoomGate", "gate", gate, "dir", dir)
	return &RoomGate{StockGate: gate, dir: dir}
}

func (g *RoomGate) open(ctx context.Context, v domain.Voucher) error {
	if err := g.dir.store.Open(ctx, v); err != nil {
		return fmt.Errorf("open waiting room of voucher %d: %w", v.ID(), err)
	}
	g.dir.remember(v)
	return nil
}

func (g *RoomGate) Preheat(ctx context.Context, v domain.Voucher) error {
	if err := g.open(ctx, v); err != nil {
		return err
	}
	return g.StockGate.Preheat(ctx, v)
}

func (g *RoomGate) Restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) (bool, error) {
	if err := g.open(ctx, v); err != nil {
		return false, err
	}
	return g.StockGate.Restore(ctx, v, buyers)
}

// RoomSigner signs tickets and passes; every instance must sign with the same key.
type RoomSigner struct{ key []byte }

const MinRoomKey = 32

// NewRoomSigner panics on a key shorter than MinRoomKey.
func NewRoomSigner(key []byte) *RoomSigner {
	if len(key) < MinRoomKey {
		panic("application: a waiting room's signing key needs at least 32 bytes")
	}
	return &RoomSigner{key: append([]byte(nil), key...)}
}

// The kind is signed too, so a ticket is never taken for a pass.
const (
	kindTicket byte = 't'
	kindPass   byte = 'p'
)

const (
	tokenBody = 1 + 8 + 8 + 8 + 8 // kind, voucher, user, n, exp
	tokenMAC  = 16
)

var errBadToken = errors.New("bad room token")

// roomToken: a ticket's n is the join index, exp 0; a pass's n is the place
// it was issued for, exp its expiry (Unix ms).
type roomToken struct {
	voucher domain.VoucherID
	user    domain.UserID
	n, exp  int64
}

func (s *RoomSigner) sign(kind byte, t roomToken) string {
	b := make([]byte, 1, tokenBody+tokenMAC)
	b[0] = kind
	for _, f := range [...]int64{int64(t.voucher), int64(t.user), t.n, t.exp} {
		b = binary.BigEndian.AppendUint64(b, uint64(f))
	}
	return base64.RawURLEncoding.EncodeToString(append(b, s.mac(b)...))
}

func (s *RoomSigner) mac(body []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(body)
	return m.Sum(nil)[:tokenMAC]
}

// open checks signature, kind, voucher and user, not expiry.
func (s *RoomSigner) open(kind byte, tok string, voucher domain.VoucherID, user domain.UserID) (roomToken, error) {
	var b [tokenBody + tokenMAC]byte
	if base64.RawURLEncoding.EncodedLen(len(b)) != len(tok) {
		return roomToken{}, errBadToken
	}
	if _, err := base64.RawURLEncoding.Decode(b[:], []byte(tok)); err != nil || b[0] != kind {
		return roomToken{}, errBadToken
	}
	if !hmac.Equal(s.mac(b[:tokenBody]), b[tokenBody:]) {
		return roomToken{}, errBadToken
	}
	field := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[1+8*i:])) }
	t := roomToken{voucher: domain.VoucherID(field(0)), user: domain.UserID(field(1)), n: field(2), exp: field(3)}
	if t.voucher != voucher || t.user != user || t.n < 0 {
		return roomToken{}, errBadToken
	}
	return t, nil
}

// RoomDirectory is one instance's view of the waiting rooms: which sales have
// one, and how far each line has moved (one store read per room per RoomRefresh).
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

const maxAbsent = 10_000 // bounds both "no room" caches against made-up ids

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
	mustHave("RoomDirectory", "store", store, "clock", clock)
	return &RoomDirectory{
		store: store, clock: clock,
		rooms:  make(map[domain.VoucherID]*roomView),
		none:   make(map[domain.VoucherID]struct{}),
		absent: make(map[domain.VoucherID]time.Time),
		flight: make(map[domain.VoucherID]*lookup),
	}
}

// randomSeed is a secret for the draw; the store keeps the first after it closes.
func randomSeed() (s [domain.RoomSeedSize]byte) {
	rand.Read(s[:]) // never fails (crypto/rand crashes the program instead)
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

// state is the room as of at most RoomRefresh ago; one caller that finds it
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
	views := slices.Collect(maps.Values(d.rooms))
	d.mu.Unlock()
	out := make([]RoomFigures, 0, len(views))
	for _, v := range views {
		v.mu.Lock()
		if f := v.figures(); !f.ReadAt.IsZero() && !domain.Ended(v.cfg.End, now) {
			out = append(out, f)
		}
		v.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b RoomFigures) int { return cmp.Compare(a.Voucher, b.Voucher) })
	return out
}
