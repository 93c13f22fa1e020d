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

// IDs issues order IDs from one counter, stamped with the clock's time;
// unique for the life of the value, as a fake needs.
type IDs struct {
	clock  ports.Clock
	seq    *atomic.Uint64
	mu     sync.Mutex
	unused []uint32 // sequence numbers handed back, reissued first
}

var _ ports.OrderIDs = (*IDs)(nil)

// errIDsExhausted mirrors the Redis adapter's limit of a 32-bit sequence.
var errIDsExhausted = errors.New("memory: order id sequence exhausted")

func NewIDs(clock ports.Clock) *IDs {
	return (&IDs{seq: new(atomic.Uint64)}).Sharing(clock)
}

// Sharing returns another issuer on the same sequence with its own clock, as
// a second process shares the Redis counter.
func (g *IDs) Sharing(clock ports.Clock) *IDs {
	return &IDs{clock: clock, seq: g.seq}
}

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
		if seq = g.seq.Add(1); seq > math.MaxUint32 {
			return 0, errIDsExhausted
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
