// Package memory holds in-memory, concurrency-safe fakes of every port for
// unit and component tests, behaving as the real adapters (test/contract runs both).
package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"sync"
	"sync/atomic"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var (
	_ ports.StockGate         = (*Gate)(nil)
	_ ports.GateControls      = (*Gate)(nil)
	_ ports.GateAudit         = (*Gate)(nil)
	_ ports.GateProbe         = (*Gate)(nil)
	_ ports.OrderIndex        = (*Gate)(nil)
	_ ports.RoomStore         = (*Rooms)(nil)
	_ ports.OrderRepository   = (*Orders)(nil)
	_ ports.OrderLifecycle    = (*Orders)(nil)
	_ ports.OrderLedger       = (*Orders)(nil)
	_ ports.SaleOrders        = (*Orders)(nil)
	_ ports.VoucherRepository = (*Vouchers)(nil)
	_ ports.SaleControls      = (*Vouchers)(nil)
	_ ports.AuditLog          = (*AuditLog)(nil)
	_ ports.OrderIDs          = (*IDs)(nil)
	_ ports.Sessions          = (*Sessions)(nil)
	_ ports.TokenIssuer       = (*Sessions)(nil)
)

// mutex is a fake's one lock. lock takes it unless ctx is done, so a call on a cancelled
// context fails first and changes nothing, as a real adapter's round trip does.
type mutex struct{ sync.Mutex }

func (m *mutex) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.Lock()
	return nil
}

// do runs f holding m, unless ctx is done.
func (m *mutex) do(ctx context.Context, f func() error) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.Unlock()
	return f()
}

// locked is do for an f with a result.
func locked[T any](ctx context.Context, m *mutex, f func() (T, error)) (out T, err error) {
	err = m.do(ctx, func() error { out, err = f(); return err })
	return out, err
}

// IDs issues order IDs from one counter, stamped with the clock's time; unique for the life of the value.
type IDs struct {
	clock  ports.Clock
	seq    *atomic.Uint64
	mu     sync.Mutex
	unused []uint32 // sequence numbers handed back, reissued first
}

func NewIDs(clock ports.Clock) *IDs { return (&IDs{seq: new(atomic.Uint64)}).Sharing(clock) }

// Sharing returns another issuer on the same sequence with its own clock, as a second process shares the Redis counter.
func (g *IDs) Sharing(clock ports.Clock) *IDs { return &IDs{clock: clock, seq: g.seq} }

// Next stamps a parked number anew, as the Redis adapter does.
func (g *IDs) Next(ctx context.Context) (domain.OrderID, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	g.mu.Lock()
	var seq uint64
	if n := len(g.unused); n > 0 {
		seq, g.unused = uint64(g.unused[n-1]), g.unused[:n-1]
	}
	g.mu.Unlock()
	if seq == 0 {
		if seq = g.seq.Add(1); seq > math.MaxUint32 { // the Redis adapter's limit of a 32-bit sequence
			return 0, errors.New("memory: order id sequence exhausted")
		}
	}
	return domain.NewOrderID(g.clock.Now(), uint32(seq))
}

// Unused parks an ID's sequence number for the next Next.
func (g *IDs) Unused(id domain.OrderID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unused = append(g.unused, id.Seq())
}

// Sessions maps login tokens to users, which never expire here.
type Sessions struct {
	mu     mutex
	tokens map[string]domain.UserID
}

func NewSessions() *Sessions { return &Sessions{tokens: make(map[string]domain.UserID)} }

func (s *Sessions) UserID(ctx context.Context, token string) (domain.UserID, error) {
	return locked(ctx, &s.mu, func() (domain.UserID, error) {
		if id, ok := s.tokens[token]; ok {
			return id, nil
		}
		return 0, ports.ErrUnknownToken
	})
}

// Mint returns 32 random hex characters, like the Redis store's tokens.
func (s *Sessions) Mint(ctx context.Context, user domain.UserID) (string, error) {
	return locked(ctx, &s.mu, func() (string, error) {
		if user <= 0 {
			return "", &domain.ValidationError{Field: "userId", Reason: "must be a positive id"}
		}
		b := make([]byte, 16)
		_, _ = rand.Read(b) // crypto/rand.Read never fails since Go 1.24
		token := hex.EncodeToString(b)
		s.tokens[token] = user
		return token, nil
	})
}
