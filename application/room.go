package application

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// RoomPhase is where a user stands in a waiting room.
type RoomPhase string

const (
	// RoomDrawPending: in the pre-queue; the place is drawn at the begin.
	RoomDrawPending RoomPhase = "pre_queue"
	// RoomWaiting: in line, Ahead places in front.
	RoomWaiting RoomPhase = "waiting"
	// RoomAdmitted: the pass is valid until PassExpires.
	RoomAdmitted RoomPhase = "admitted"
	// RoomPassExpired: admitted, but the pass was not used in time; the
	// place went to the next in line.
	RoomPassExpired RoomPhase = "expired"
	// RoomSoldOut: the sale has nothing left to sell (and holds no pass
	// outstanding); no place will be admitted unless an order lapses and
	// its unit comes back.
	RoomSoldOut RoomPhase = "sold_out"
)

// RoomStatus is what a join or a poll answers.
type RoomStatus struct {
	// Ticket is the user's signed place, to poll with.
	Ticket string
	Phase  RoomPhase
	// Position is the place in line (1 = first) once drawn; 0 before.
	Position int64
	// Ahead is how many places in front of the user are not admitted yet.
	Ahead int64
	// Joined is how many have joined the room.
	Joined int64
	// Wait is the estimated time until admission (before the draw: until
	// the begin plus half the pre-queue at the admission rate).
	Wait time.Duration
	// DrawAt is the sale's begin, when the pre-queue is drawn.
	DrawAt time.Time
	// Pass and PassExpires, once admitted.
	Pass        string
	PassExpires time.Time
	// PollAfter is when to ask again (0: no need, the answer is final or
	// the pass is in hand).
	PollAfter time.Duration
}

// InDraw tells whether the user is in the pre-queue, whose order is drawn
// at DrawAt.
func (st RoomStatus) InDraw() bool { return st.Phase == RoomDrawPending }

// WaitingRoom is what a sale's waiting room does for its users: Join puts
// them in line, Poll tells them where they stand and, once admitted, hands
// them their pass, and the claim's first step checks that pass (Check) and
// records it spent (Used). It answers from the instance's view of the rooms
// (RoomDirectory), so a waiting user's poll costs no Redis: the ticket,
// signed at the join, says the user's place.
type WaitingRoom struct {
	dir    *RoomDirectory
	signer *RoomSigner
}

func NewWaitingRoom(dir *RoomDirectory, signer *RoomSigner) *WaitingRoom {
	mustHave("WaitingRoom", map[string]any{"dir": dir, "signer": signer})
	return &WaitingRoom{dir: dir, signer: signer}
}

// Join puts user in the sale's line: one place per user, and joining again
// answers the same place. It costs one store round trip. Refusals are
// domain.ErrNoRoom, ErrRoomNotOpen and ErrEnded.
func (h *WaitingRoom) Join(ctx context.Context, voucher domain.VoucherID, user domain.UserID) (RoomStatus, error) {
	v, err := h.dir.room(ctx, voucher)
	if err != nil {
		return RoomStatus{}, err
	}
	if v == nil {
		return RoomStatus{}, domain.ErrNoRoom
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
	t := roomToken{voucher: voucher, user: user, n: j}
	// A join that ran after the draw closed must not be answered from a
	// view of the room read before: it would be told it is in the draw
	// (pre_queue) while its index is past it.
	return h.status(ctx, v, t, drawn)
}

// Poll answers the poll of user with ticket, from the instance's view of the
// room (refreshed once per RoomRefresh); a ticket that is not the user's for
// this voucher (or not signed here) is domain.ErrNotInRoom.
func (h *WaitingRoom) Poll(ctx context.Context, voucher domain.VoucherID, user domain.UserID, ticket string) (RoomStatus, error) {
	t, err := h.signer.open(kindTicket, ticket, voucher, user)
	if err != nil {
		return RoomStatus{}, domain.ErrNotInRoom
	}
	v, err := h.dir.room(ctx, voucher)
	if err != nil {
		return RoomStatus{}, err
	}
	if v == nil {
		return RoomStatus{}, domain.ErrNoRoom
	}
	return h.status(ctx, v, t, false)
}

// status answers where ticket t stands, from the instance's view of the room.
// drawn: the caller knows the draw has closed, so a view that has not seen
// it is read again.
func (h *WaitingRoom) status(ctx context.Context, v *roomView, t roomToken, drawn bool) (RoomStatus, error) {
	snap, err := h.dir.state(ctx, v, drawn)
	if err != nil {
		return RoomStatus{}, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	now := h.dir.clock.Now()
	rate := int64(v.cfg.Rules.AdmitPerSecond())
	st := RoomStatus{Ticket: h.signer.sign(kindTicket, t), Joined: max(snap.Joined, t.n+1), DrawAt: v.cfg.Begin}
	// Sold out: nothing left and no pass outstanding (passes never exceed
	// what is left), so no place can be admitted until a unit comes back.
	soldOut := snap.Left == 0
	if !snap.Drawn {
		st.Phase = RoomDrawPending
		st.Wait = max(v.cfg.Begin.Sub(now), 0) + perRate(st.Joined/2, rate)
		st.PollAfter = pollAfter(v.cfg.Begin.Sub(now))
		return st, nil
	}
	p := snap.draw.Place(t.n)
	st.Position = p + 1
	if p >= snap.Boundary {
		if soldOut {
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

// passExpiry is when a pass admitted at at stops being valid: a little
// before the room lets its place lapse (at + ttl, by the clock of whichever
// instance advances the room), so that with clocks up to passGrace apart no
// instance still takes a pass whose unit the line has given to the next.
func passExpiry(at time.Time, ttl time.Duration) time.Time {
	return at.Add(ttl - min(passGrace, ttl/5))
}

// passGrace bounds the clock difference between instances (NTP keeps it to
// milliseconds; a second leaves room for a bad one).
const passGrace = time.Second

// pollAfter bounds when a waiting client should ask again: not before the
// room's view can have moved (RoomRefresh), not later than 5 s, so an
// admission is seen within a small part of the pass's life.
func pollAfter(d time.Duration) time.Duration {
	return min(max(d, RoomRefresh), 5*time.Second)
}

// estimateWait is how long until ahead+1 more places are admitted. Places
// come at the rate while units are free beyond the passes outstanding;
// beyond those, only as outstanding passes lapse unused (a used pass takes
// its unit along), one pass lifetime per round, at the share of passes the
// room has seen lapse so far (a prior of one in two before any is known).
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

// perRate is how long n admissions take at rate per second.
func perRate(n, rate int64) time.Duration {
	if n <= 0 || rate <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second / time.Duration(rate)
}

// Check is the claim's first step: a sale without a room passes at the cost
// of a map lookup (after the instance's first look at the sale), without
// reading pass; a sale with one needs the user's valid pass, checked by its
// signature, and one store read that it is unspent. It returns the position
// the pass admits (-1 for a sale without a room) or domain.ErrPassRequired
// (no pass, or not this user's for this sale), domain.ErrPassExpired, or
// domain.ErrAlreadyClaimed when the user has used a pass of this room
// already: a pass admits one order, so an order that lapsed or was cancelled
// does not let its pass claim again (even where SECKILL_RECLAIM_AFTER_CANCEL
// frees the buyer), and its unit goes to the line. ErrBusy when the room
// could not be read.
func (h *WaitingRoom) Check(ctx context.Context, voucher domain.VoucherID, user domain.UserID, pass PassSource) (int64, error) {
	v, err := h.dir.room(ctx, voucher)
	if err != nil {
		return -1, err
	}
	if v == nil {
		return -1, nil
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

// Used records that a claim succeeded with the pass for position (what Check
// returned for a sale with a room), so its place counts as used, not
// outstanding. One store round trip; a failure leaves the place to expire
// with its pass.
func (h *WaitingRoom) Used(ctx context.Context, voucher domain.VoucherID, user domain.UserID, position int64) error {
	if err := h.dir.store.Use(ctx, voucher, user, position); err != nil {
		return fmt.Errorf("mark pass of voucher %d used: %w", voucher, err)
	}
	return nil
}

// RoomGate is the StockGate that opens a sale's waiting room before the gate
// makes the sale claimable, on a preheat and on a restore from the database
// alike: there is never a moment when a room sale's gate exists and its
// room does not, so no instance can take it for a sale without a room. Sales
// without a room go straight to the gate.
type RoomGate struct {
	ports.StockGate
	rooms ports.RoomStore
	dir   *RoomDirectory
}

func NewRoomGate(gate ports.StockGate, rooms ports.RoomStore, dir *RoomDirectory) *RoomGate {
	mustHave("RoomGate", map[string]any{"gate": gate, "rooms": rooms, "dir": dir})
	return &RoomGate{StockGate: gate, rooms: rooms, dir: dir}
}

func (g *RoomGate) open(ctx context.Context, v domain.Voucher) error {
	if err := g.rooms.Open(ctx, v); err != nil {
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

// RoomSigner signs what a waiting room hands its users, so the service can
// check it later without asking Redis: a ticket (the user's join index in a
// sale's room) and a pass (the user's admission to claim, until it expires).
// Every instance must sign with the same key.
type RoomSigner struct{ key []byte }

// MinRoomKey is the shortest signing key accepted.
const MinRoomKey = 32

// NewRoomSigner panics on a key shorter than MinRoomKey (a wiring mistake).
func NewRoomSigner(key []byte) *RoomSigner {
	if len(key) < MinRoomKey {
		panic("application: a waiting room's signing key needs at least 32 bytes")
	}
	return &RoomSigner{key: append([]byte(nil), key...)}
}

// The kinds of signed token; the kind is signed too, so a ticket is never
// taken for a pass.
const (
	kindTicket byte = 't'
	kindPass   byte = 'p'
)

const (
	tokenBody = 1 + 8 + 8 + 8 + 8 // kind, voucher, user, n, exp
	tokenMAC  = 16
)

var errBadToken = errors.New("bad room token")

// roomToken is what a ticket or a pass says, signed. A ticket is a user's
// place in a room's line: n is its join index, exp 0. A pass lets its user
// claim the sale until exp (Unix ms): n is the place it was issued for.
type roomToken struct {
	voucher domain.VoucherID
	user    domain.UserID
	n, exp  int64
}

func (s *RoomSigner) sign(kind byte, t roomToken) string {
	var b [tokenBody + tokenMAC]byte
	b[0] = kind
	binary.BigEndian.PutUint64(b[1:], uint64(t.voucher))
	binary.BigEndian.PutUint64(b[9:], uint64(t.user))
	binary.BigEndian.PutUint64(b[17:], uint64(t.n))
	binary.BigEndian.PutUint64(b[25:], uint64(t.exp))
	m := hmac.New(sha256.New, s.key)
	m.Write(b[:tokenBody])
	copy(b[tokenBody:], m.Sum(nil))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// open checks a token's signature and kind, and that it is user's for
// voucher; it does not look at a pass's expiry.
func (s *RoomSigner) open(kind byte, tok string, voucher domain.VoucherID, user domain.UserID) (roomToken, error) {
	var b [tokenBody + tokenMAC]byte
	if base64.RawURLEncoding.EncodedLen(len(b)) != len(tok) {
		return roomToken{}, errBadToken
	}
	if _, err := base64.RawURLEncoding.Decode(b[:], []byte(tok)); err != nil || b[0] != kind {
		return roomToken{}, errBadToken
	}
	m := hmac.New(sha256.New, s.key)
	m.Write(b[:tokenBody])
	if !hmac.Equal(m.Sum(nil)[:tokenMAC], b[tokenBody:]) {
		return roomToken{}, errBadToken
	}
	t := roomToken{voucher: domain.VoucherID(binary.BigEndian.Uint64(b[1:])), user: domain.UserID(binary.BigEndian.Uint64(b[9:])),
		n: int64(binary.BigEndian.Uint64(b[17:])), exp: int64(binary.BigEndian.Uint64(b[25:]))}
	if t.voucher != voucher || t.user != user || t.n < 0 {
		return roomToken{}, errBadToken
	}
	return t, nil
}
