package application

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

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
	tokenBody = 1 + 8 + 8 + 8 + 8 // kind, voucher, user, index, expiry (ms; 0 for a ticket)
	tokenMAC  = 16
)

var errBadToken = errors.New("bad room token")

// Ticket is a user's place in a room's line: its join index.
type Ticket struct {
	Voucher domain.VoucherID
	User    domain.UserID
	Index   int64
}

// Pass lets its user claim its sale until Expires; Position is the place it
// was issued for.
type Pass struct {
	Voucher  domain.VoucherID
	User     domain.UserID
	Position int64
	Expires  time.Time
}

func (s *RoomSigner) sign(kind byte, v domain.VoucherID, u domain.UserID, n int64, exp int64) string {
	var b [tokenBody + tokenMAC]byte
	b[0] = kind
	binary.BigEndian.PutUint64(b[1:], uint64(v))
	binary.BigEndian.PutUint64(b[9:], uint64(u))
	binary.BigEndian.PutUint64(b[17:], uint64(n))
	binary.BigEndian.PutUint64(b[25:], uint64(exp))
	m := hmac.New(sha256.New, s.key)
	m.Write(b[:tokenBody])
	copy(b[tokenBody:], m.Sum(nil))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *RoomSigner) open(kind byte, tok string) (v domain.VoucherID, u domain.UserID, n int64, exp int64, err error) {
	var b [tokenBody + tokenMAC]byte
	if base64.RawURLEncoding.EncodedLen(len(b)) != len(tok) {
		return 0, 0, 0, 0, errBadToken
	}
	if _, err := base64.RawURLEncoding.Decode(b[:], []byte(tok)); err != nil || b[0] != kind {
		return 0, 0, 0, 0, errBadToken
	}
	m := hmac.New(sha256.New, s.key)
	m.Write(b[:tokenBody])
	if !hmac.Equal(m.Sum(nil)[:tokenMAC], b[tokenBody:]) {
		return 0, 0, 0, 0, errBadToken
	}
	return domain.VoucherID(binary.BigEndian.Uint64(b[1:])), domain.UserID(binary.BigEndian.Uint64(b[9:])),
		int64(binary.BigEndian.Uint64(b[17:])), int64(binary.BigEndian.Uint64(b[25:])), nil
}

// Ticket signs t.
func (s *RoomSigner) Ticket(t Ticket) string {
	return s.sign(kindTicket, t.Voucher, t.User, t.Index, 0)
}

// OpenTicket checks a ticket's signature and that it is user's for voucher.
func (s *RoomSigner) OpenTicket(tok string, voucher domain.VoucherID, user domain.UserID) (Ticket, error) {
	v, u, j, _, err := s.open(kindTicket, tok)
	if err != nil || v != voucher || u != user || j < 0 {
		return Ticket{}, errBadToken
	}
	return Ticket{Voucher: v, User: u, Index: j}, nil
}

// Pass signs p.
func (s *RoomSigner) Pass(p Pass) string {
	return s.sign(kindPass, p.Voucher, p.User, p.Position, p.Expires.UnixMilli())
}

// OpenPass checks a pass's signature and that it is user's for voucher; it
// does not look at the expiry.
func (s *RoomSigner) OpenPass(tok string, voucher domain.VoucherID, user domain.UserID) (Pass, error) {
	v, u, p, exp, err := s.open(kindPass, tok)
	if err != nil || v != voucher || u != user || p < 0 {
		return Pass{}, errBadToken
	}
	return Pass{Voucher: v, User: u, Position: p, Expires: time.UnixMilli(exp)}, nil
}
