package redisgate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisbatch"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Defaults of IDOptions.
const (
	DefaultIDPrefix = "icr:order:"
	DefaultIDBlock  = 1000
)

// counterTTL outlives the day a counter names by a day, so a counter can never
// expire (and restart at 0) while its day is still being issued, whatever
// the skew between instances. It is not an option for that reason.
const counterTTL = 48 * time.Hour

// ErrSequenceExhausted: a day's counter passed 2^32-1, the most a 32-bit
// sequence can hold.
var ErrSequenceExhausted = errors.New("order id sequence exhausted for the day")

// IDOptions configures IDs.
type IDOptions struct {
	// Prefix of the day counter's key (default "icr:order:", giving the
	// original's icr:order:yyyy:MM:dd).
	Prefix string
	// Block is how many sequence numbers one INCRBY leases (default 1000).
	Block int
	// Clock tells the time of each ID (default: the system clock).
	Clock ports.Clock
	// Leases carries the lease's INCRBY and EXPIRE: typically the client's
	// asynchronous AutoPipeliner (see redisbatch). Nil means the client
	// given to NewIDs.
	Leases redis.UniversalClient
}

// IDs issues order IDs in the original's layout (seconds since 2022-01-01 UTC
// and a 32-bit sequence). The sequence comes from one Redis counter per UTC
// day, leased in blocks, so only one ID in Block costs a round trip.
//
// Why IDs are unique across processes and restarts: each block of a day's
// counter is handed to one lease only, so within a UTC day no two IDs share a
// sequence number; and a lease is used only for IDs whose second falls on the
// day its counter names (the rest is dropped when the day changes, in either
// direction), so IDs of different days differ in their seconds. Losing the
// counter (a Redis without persistence) breaks this; the database then refuses
// the colliding order (domain.FailIDConflict).
type IDs struct {
	rdb    redis.UniversalClient
	prefix string
	block  int64
	clock  ports.Clock

	// lock is a one-slot semaphore rather than a sync.Mutex: a caller
	// waiting for a lease in flight must give up when its context ends, so
	// a stalled Redis holds no claim past its budget.
	lock chan struct{}
	mu   sync.Mutex // guards unused only
	day  date       // the UTC day of the lease (its counter key's name)
	next int64      // next sequence to hand out
	last int64      // last sequence of the lease
	// unused holds IDs handed back by refused claims, reissued first. They
	// were never written anywhere, so reissuing keeps every ID unique; the
	// cap bounds what a stampede of refusals can park here.
	unused []domain.OrderID
}

// maxUnused bounds the IDs kept for reuse; beyond it they are dropped, which
// only spends them.
const maxUnused = 4096

var _ ports.OrderIDs = (*IDs)(nil)

// NewIDs panics on a nil client or a block outside [1, 2^31).
func NewIDs(rdb redis.UniversalClient, opts IDOptions) *IDs {
	if rdb == nil {
		panic("redisgate: NewIDs needs a non-nil Redis client")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultIDPrefix
	}
	if opts.Block == 0 {
		opts.Block = DefaultIDBlock
	}
	if opts.Block < 1 || opts.Block >= math.MaxInt32 {
		panic(fmt.Sprintf("redisgate: id block %d must be in [1, 2^31)", opts.Block))
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.Leases == nil {
		opts.Leases = rdb
	}
	return &IDs{rdb: opts.Leases, prefix: opts.Prefix, block: int64(opts.Block), clock: opts.Clock,
		lock: make(chan struct{}, 1)}
}

// Next holds the lock across the lease's round trip: callers arriving then
// need the new block anyway, and a second concurrent lease would only waste
// one. A caller whose ctx ends while it waits gets ctx's error.
func (g *IDs) Next(ctx context.Context) (domain.OrderID, error) {
	g.mu.Lock()
	if n := len(g.unused); n > 0 {
		id := g.unused[n-1]
		g.unused = g.unused[:n-1]
		g.mu.Unlock()
		return id, nil
	}
	g.mu.Unlock()
	select {
	case g.lock <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("wait for an order id lease: %w", ctx.Err())
	}
	defer func() { <-g.lock }()
	now := g.clock.Now().UTC()
	// Compared as a date, formatted only for a lease: a claim then costs no
	// string.
	if dateOf(now) != g.day || g.next > g.last {
		if err := g.lease(ctx, now); err != nil {
			return 0, err
		}
	}
	seq := g.next
	g.next++
	return domain.NewOrderID(now, uint32(seq))
}

// Unused parks an ID that Next issued and nobody wrote anywhere, so the next
// Next reissues it instead of spending a new sequence number: refused claims,
// most answers of a stampede, then cost none of the day's 2^32 IDs.
func (g *IDs) Unused(id domain.OrderID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.unused) < maxUnused {
		g.unused = append(g.unused, id)
	}
}

// date is a UTC calendar day.
type date struct {
	year  int
	month time.Month
	day   int
}

func dateOf(t time.Time) date {
	y, m, d := t.Date()
	return date{y, m, d}
}

// lease takes a new block from the counter of now's UTC day.
func (g *IDs) lease(ctx context.Context, now time.Time) error {
	key := g.prefix + now.Format("2006:01:02")
	// EXPIRE rides along with every lease, so a crash after the first INCRBY
	// cannot leave a counter without a TTL.
	// Sent one after the other, not together: a pipeliner that runs batches
	// in parallel (Unordered) could run the EXPIRE first, on no key. A lease
	// is one claim in Block, so the second round trip costs nothing much.
	incr := redis.NewIntCmd(ctx, "incrby", key, g.block)
	expire := redis.NewBoolCmd(ctx, "expire", key, int64(counterTTL/time.Second))
	err := redisbatch.Do(ctx, g.rdb, incr)
	if err == nil {
		err = incr.Err()
	}
	if err == nil {
		err = redisbatch.Do(ctx, g.rdb, expire)
	}
	if err == nil {
		err = expire.Err()
	}
	if err != nil {
		return fmt.Errorf("lease order id block from %s: %w", key, err)
	}
	hi := incr.Val()
	lo := hi - g.block + 1
	if lo < 1 {
		return fmt.Errorf("lease order id block from %s: counter at %d is below the block size", key, hi)
	}
	if lo > math.MaxUint32 {
		return fmt.Errorf("%w: %s", ErrSequenceExhausted, key)
	}
	g.day, g.next, g.last = dateOf(now), lo, min(hi, math.MaxUint32)
	return nil
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
