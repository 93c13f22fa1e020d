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
	RoomDrawPending RoomPhase = "pre_queue" // the place is drawn at the begin
	RoomWaiting     RoomPhase = "waiting"   // in line, Ahead places in front
	RoomAdmitted    RoomPhase = "admitted"  // the pass is valid until PassExpires
	RoomPassExpired RoomPhase = "expired"   // the pass was not used in time
	// RoomSoldOut: nothing left and no pass outstanding; no place is admitted
	// unless an order lapses and its unit comes back.
	RoomSoldOut RoomPhase = "sold_out"
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
// Used). A poll costs no Redis: the signed ticket says the user's place, and
// the room's state is this instance's view (RoomDirectory).
type WaitingRoom struct {
	dir    *RoomDirectory
	signer *RoomSigner
}

func NewWaitingRoom(dir *RoomDirectory, signer *RoomSigner) *WaitingRoom {
	mustHave("WaitingRoom", map[string]any{"dir": dir, "signer": signer})
	return &WaitingRoom{dir: dir, signer: signer}
}

// Join gives user one place in the line (again: the same place).
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
	// A join after the draw closed must not be answered from a view read before.
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
	if err != nil {
		return RoomStatus{}, err
	}
	if v == nil {
		return RoomStatus{}, domain.ErrNoRoom
	}
	return h.status(ctx, v, t, false)
}

// status answers where t stands; drawn: the draw is known closed, so a view
// that has not seen it is read again.
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
// another instance's clock), so no instance takes a pass whose unit went on.
func passExpiry(at time.Time, ttl time.Duration) time.Time {
	return at.Add(ttl - min(passGrace, ttl/5))
}

// passGrace bounds the clock difference between instances.
const passGrace = time.Second

// pollAfter: not before the view can have moved, not later than 5 s, so an
// admission is seen within a small part of the pass's life.
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

// Check is the claim's first step: a map lookup for a sale without a room
// (-1); for one with a room, the pass's signature and one store read that it
// is unspent, returning the position it admits. A pass admits one order, even
// where SECKILL_RECLAIM_AFTER_CANCEL frees the buyer (domain.ErrAlreadyClaimed).
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

// Used records the pass for position (Check's) spent, in one round trip.
func (h *WaitingRoom) Used(ctx context.Context, voucher domain.VoucherID, user domain.UserID, position int64) error {
	if err := h.dir.store.Use(ctx, voucher, user, position); err != nil {
		return fmt.Errorf("mark pass of voucher %d used: %w", voucher, err)
	}
	return nil
}

// RoomGate is the StockGate that opens a sale's waiting room before its gate
// (Preheat, Restore), so no instance can take a room sale for one without.
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

// RoomSigner signs tickets and passes, checked later without Redis. Every
// instance must sign with the same key.
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

// open checks signature, kind, voucher and user, not expiry.
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
