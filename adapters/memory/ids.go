package memory

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// IDs issues order IDs from one process-wide counter, stamped with the
// clock's time. Unique for the life of the value, which is all a fake needs:
// there is no other process and no restart to survive.
type IDs struct {
	clock ports.Clock
	seq   *atomic.Uint64

	mu     sync.Mutex
	unused []uint32 // sequence numbers handed back, reissued first
}

var _ ports.OrderIDs = (*IDs)(nil)

// errIDsExhausted mirrors the Redis adapter's limit of a 32-bit sequence.
var errIDsExhausted = errors.New("memory: order id sequence exhausted")

// NewIDs panics on a nil clock, a wiring mistake.
func NewIDs(clock ports.Clock) *IDs {
	return (&IDs{seq: new(atomic.Uint64)}).Sharing(clock)
}

// Sharing returns another issuer on the same sequence with its own clock, the
// way a second process shares the Redis counter, so tests can model several
// instances (with clocks that disagree) on one store. It panics on a nil
// clock, a wiring mistake.
func (g *IDs) Sharing(clock ports.Clock) *IDs {
	if clock == nil {
		panic("memory: IDs need a non-nil clock")
	}
	return &IDs{clock: clock, seq: g.seq}
}

func (g *IDs) Next(ctx context.Context) (domain.OrderID, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// A parked number is stamped anew, as the Redis adapter does: the
	// sequence never repeats here, whatever the second.
	g.mu.Lock()
	var seq uint64
	if n := len(g.unused); n > 0 {
		seq, g.unused = uint64(g.unused[n-1]), g.unused[:n-1]
	}
	g.mu.Unlock()
	if seq == 0 {
		if seq = g.seq.Add(1); seq > math.MaxUint32 {
			return 0, errIDsExhausted
		}
	}
	return domain.NewOrderID(g.clock.Now(), uint32(seq))
}

// Unused parks an ID's sequence number for the next Next, which reissues it
// with its own second, like the Redis adapter's.
func (g *IDs) Unused(id domain.OrderID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unused = append(g.unused, id.Seq())
}
