package redisgate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Defaults of IDOptions.
const (
	DefaultIDPrefix       = "icr:order:"
	DefaultIDBlock        = 1000
	DefaultIDLeaseTimeout = 250 * time.Millisecond
)

// counterTTL outlives the day a counter names by a day, so a counter can never
// expire (and restart at 0) while its day is still being issued, whatever
// the skew between instances. It is not an option for that reason.
const counterTTL = 48 * time.Hour

// ErrSequenceExhausted: every shard of a day's sequence is spent (each hands
// out 2^28-1 numbers a day, see IDShards).
var ErrSequenceExhausted = errors.New("order id sequence exhausted for the day")

// ErrIDsClosed: Next needed a new lease after Close.
var ErrIDsClosed = errors.New("order ids closed")

// IDOptions configures IDs.
type IDOptions struct {
	// Prefix of the counters' keys (default "icr:order:", giving
	// icr:order:{s07}:yyyy:MM:dd for shard 7).
	Prefix string
	// Block is how many sequence numbers one INCRBY leases (default 1000,
	// at most 2^28-1, a shard's day).
	Block int
	// Clock tells the time of each ID (default: the system clock).
	Clock ports.Clock
	// Leases carries the lease's INCRBY and EXPIRE: typically the client's
	// asynchronous AutoPipeliner (see redisx.Do). Nil means the client
	// given to NewIDs.
	Leases redis.UniversalClient
	// LeaseTimeout is how long a lease waits for one shard's counter
	// before asking the next one too (default 250 ms): a dead Redis master
	// costs a lease this much, far under a claim's budget, while a Redis
	// that is only slow still answers. An attempt is abandoned after eight
	// of them.
	LeaseTimeout time.Duration
}

// IDs issues order IDs in the original's layout (seconds since 2022-01-01 UTC
// << 32 | a 32-bit sequence). A UTC day's sequence is split over IDShards
// counters, each under its own hash tag, the tags spread evenly over the
// cluster's slots, so no one key (and no one Redis master) stops the issue of
// IDs: a lease whose shard fails, or does not answer within LeaseTimeout, asks
// the next shard, and passes over the failed one for IDShardRetry. Blocks are
// leased in the background once the block in use is half spent, so a claim
// normally never waits on Redis for its ID.
//
// Why IDs are unique across processes, restarts and days:
//   - shard k's counter for a day hands out n = 1, 2, ... < 2^28, each block of
//     it to one lease only (INCRBY is atomic), and the sequence is
//     k<<28 | n, so shards never overlap: within a UTC day no sequence number
//     goes to two leases, in any process;
//   - every process names shard k's counter alike: the tags are a fixed
//     function of k (pinned by TestIDShardKeysAreFixed), and IDShards is a
//     constant, not an option, since two processes splitting the sequence
//     differently would hand out the same numbers;
//   - a lease serves only IDs whose second falls on the day its counter
//     names (the rest is dropped when the day changes, in either direction),
//     so IDs of different days differ in their seconds;
//   - a number handed back by Unused was leased to this process alone and
//     written nowhere, so it is reissued (with the current second) once, and
//     only within its day;
//   - all of the issuer's state is behind one mutex: a lease in the
//     background only ever fills the next block, which Next takes over once
//     the current one is spent.
//
// Losing a counter (a Redis without persistence or a failover that lost the
// last writes) breaks this; the database then refuses the colliding order
// (domain.FailIDConflict). So does running this beside the previous version
// in the same seconds: its single counter icr:order:yyyy:MM:dd hands out
// shard 0's numbers too (one that stopped before this started issued only
// earlier seconds, which no ID of this one carries).
type IDs struct {
	rdb     redis.UniversalClient
	keys    [IDShards]string // shard k's key without its day
	block   int64
	clock   ports.Clock
	attempt time.Duration

	// life ends at Close: it bounds leases in flight, and wg waits for them.
	life context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu     sync.Mutex
	cur    idBlock   // the block IDs come from
	ahead  idBlock   // leased ahead, taken over when cur is spent
	run    *leaseRun // the lease in flight, nil when none
	closed bool
	shards shardState
	// unused holds sequence numbers of IDs handed back by refused claims,
	// reissued first. The cap bounds what a stampede of refusals can park
	// here.
	unused []unusedSeq
}

// idBlock is a leased range of one day's sequence; empty when next > last.
type idBlock struct {
	day        date
	next, last int64
	half       int64 // once next passes it, the following block is leased
}

func (b *idBlock) has(day date) bool { return b.day == day && b.next <= b.last }

// leaseRun is one lease in flight; err is set before done is closed.
type leaseRun struct {
	done chan struct{}
	err  error
}

type unusedSeq struct {
	day date
	seq uint32
}

// maxUnused bounds the IDs kept for reuse; beyond it they are dropped, which
// only spends them.
const maxUnused = 4096

var _ ports.OrderIDs = (*IDs)(nil)

// NewIDs panics on a nil client, a block outside [1, 2^28) or a negative
// lease timeout. Close it to stop its background leases.
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
	if opts.Block < 1 || int64(opts.Block) >= shardSpan {
		panic(fmt.Sprintf("redisgate: id block %d must be in [1, 2^28)", opts.Block))
	}
	if opts.LeaseTimeout == 0 {
		opts.LeaseTimeout = DefaultIDLeaseTimeout
	}
	if opts.LeaseTimeout < 0 {
		panic(fmt.Sprintf("redisgate: id lease timeout %s must be positive", opts.LeaseTimeout))
	}
	if opts.Clock == nil {
		opts.Clock = ports.SystemClock{}
	}
	if opts.Leases == nil {
		opts.Leases = rdb
	}
	life, stop := context.WithCancel(context.Background())
	g := &IDs{rdb: opts.Leases, block: int64(opts.Block), clock: opts.Clock, attempt: opts.LeaseTimeout,
		life: life, stop: stop}
	for k := range g.keys {
		g.keys[k] = opts.Prefix + "{" + idShardTags[k] + "}:"
	}
	// Instances start on different shards, so their leases spread over the
	// counters from the first one.
	g.shards.next = rand.IntN(IDShards)
	return g
}

// Next hands out the next number of the block in hand, and starts leasing the
// following block once this one is half spent. It waits on Redis only when
// both are spent (at the start, after midnight, or when leases fail), and
// then no longer than ctx allows; the lease itself goes on for the callers
// after it.
func (g *IDs) Next(ctx context.Context) (domain.OrderID, error) {
	for {
		now := g.clock.Now().UTC()
		// Compared as a date, formatted only for a lease: a claim then
		// costs no string.
		day := dateOf(now)
		g.mu.Lock()
		if seq, ok := g.reuse(day); ok {
			g.mu.Unlock()
			return domain.NewOrderID(now, seq)
		}
		if !g.cur.has(day) && g.ahead.has(day) {
			g.cur, g.ahead = g.ahead, idBlock{}
		}
		if g.cur.has(day) {
			seq := g.cur.next
			g.cur.next++
			if g.cur.next > g.cur.half && !g.ahead.has(day) && g.run == nil && !g.closed {
				g.startLease(now)
			}
			g.mu.Unlock()
			return domain.NewOrderID(now, uint32(seq))
		}
		run := g.run
		if run == nil {
			if g.closed {
				g.mu.Unlock()
				return 0, ErrIDsClosed
			}
			run = g.startLease(now)
		}
		g.mu.Unlock()
		select {
		case <-run.done:
		case <-ctx.Done():
			return 0, fmt.Errorf("wait for an order id lease: %w", ctx.Err())
		}
		if run.err != nil {
			// That lease tried every shard it could: another round now
			// would only repeat it.
			return 0, run.err
		}
		// The block may be for a day gone by, or taken by the callers
		// before this one: look again.
	}
}

// reuse pops the sequence number of a handed-back ID of day, dropping those of
// other days. Called with mu held.
func (g *IDs) reuse(day date) (uint32, bool) {
	for n := len(g.unused); n > 0; n-- {
		u := g.unused[n-1]
		g.unused = g.unused[:n-1]
		if u.day == day {
			return u.seq, true
		}
	}
	return 0, false
}

// Unused parks the sequence number of an ID that Next issued and nobody wrote
// anywhere, so the next Next reissues it, stamped with its own second, instead
// of spending a new one: refused claims, most answers of a stampede, then
// cost none of the day's IDs, and a reissued ID tells when its claim was
// made, not when an earlier, refused one was. It is reissued only on the day
// it was leased for, and dropped after.
func (g *IDs) Unused(id domain.OrderID) {
	u := unusedSeq{day: dateOf(id.Time().UTC()), seq: id.Seq()}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.unused) < maxUnused {
		g.unused = append(g.unused, u)
	}
}

// Close stops leasing and waits for the lease in flight: at once on a client
// that heeds its context (the AutoPipeliner), within the client's read
// timeout otherwise. Next then serves what the issuer holds, and refuses
// with ErrIDsClosed once that is spent.
func (g *IDs) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.stop()
	g.wg.Wait()
	return nil
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
