package redisgate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Defaults of IDOptions.
const (
	DefaultIDPrefix       = "icr:order:"
	DefaultIDBlock        = 1000
	DefaultIDLeaseTimeout = 250 * time.Millisecond
)

// counterTTL outlives a counter's day by a day, so it cannot expire (and restart at 0) while issued.
const counterTTL = 48 * time.Hour

// ErrSequenceExhausted: every shard of a day's sequence is spent (2^28-1 numbers each).
var ErrSequenceExhausted = errors.New("order id sequence exhausted for the day")

// ErrIDsClosed: Next needed a new lease after Close.
var ErrIDsClosed = errors.New("order ids closed")

// IDOptions configures IDs.
type IDOptions struct {
	// Prefix of the counters' keys (default "icr:order:", giving icr:order:{s07}:yyyy:MM:dd).
	Prefix string
	// Block is how many sequence numbers one INCRBY leases (default 1000, below 2^28).
	Block int
	Clock ports.Clock // default: the system clock
	// Leases carries the lease's INCRBY and EXPIRE (nil: the client given to NewIDs).
	Leases redis.UniversalClient
	// LeaseTimeout is how long a lease waits for one shard before asking the
	// next one too (default 250 ms); an attempt is abandoned after eight.
	LeaseTimeout time.Duration
}

// IDs issues order IDs in the original's layout (seconds since 2022-01-01 UTC
// << 32 | a 32-bit sequence). A UTC day's sequence is split over IDShards
// counters spread over the cluster's slots: a lease whose shard fails or is slow
// asks the next. Blocks are leased in the background once the one in use is half
// spent, so a claim normally never waits on Redis for its ID.
//
// IDs are unique across processes, restarts and days because:
//   - shard k's counter for a day leases each block once (INCRBY), and the
//     sequence is k<<28 | n, so no number of a day goes to two leases;
//   - every process names shard k's counter alike (TestIDShardKeysAreFixed);
//   - a lease serves only IDs whose second falls on its counter's day;
//   - a number handed back by Unused, leased to this process alone and
//     written nowhere, is reissued once, only within its day.
//
// Losing a counter, or running beside the previous version (its one counter
// hands out shard 0's numbers), breaks this; the database then refuses the
// colliding order (domain.FailIDConflict).
type IDs struct {
	rdb     redis.UniversalClient
	keys    [IDShards]string // shard k's key without its day
	block   int64
	clock   ports.Clock
	attempt time.Duration
	life    context.Context // ends at Close; wg waits for the leases in flight
	stop    context.CancelFunc
	wg      sync.WaitGroup

	mu     sync.Mutex // guards what follows: a background lease only fills ahead
	cur    idBlock    // the block IDs come from
	ahead  idBlock    // leased ahead, taken over when cur is spent
	run    *leaseRun  // the lease in flight, nil when none
	closed bool
	shards shardState
	unused []domain.OrderID // handed back by refused claims, reissued first; at most maxUnused
}

// idBlock is a leased range of one day's sequence; empty when next > last.
type idBlock struct {
	day        time.Time
	next, last int64
	half       int64 // once next passes it, the following block is leased
}

func (b *idBlock) has(day time.Time) bool { return b.day.Equal(day) && b.next <= b.last }

// leaseRun is one lease in flight; err is set before done is closed.
type leaseRun struct {
	done chan struct{}
	err  error
}

// maxUnused bounds what a stampede of refusals can park; beyond it an ID is only spent.
const maxUnused = 4096

var _ ports.OrderIDs = (*IDs)(nil)

// NewIDs panics on a nil client, a block outside [1, 2^28) or a negative lease
// timeout. Close it to stop its background leases.
func NewIDs(rdb redis.UniversalClient, opts IDOptions) *IDs {
	if rdb == nil {
		panic("redisgate: NewIDs needs a non-nil Redis client")
	}
	opts.Block = cmp.Or(opts.Block, DefaultIDBlock)
	if opts.Block < 1 || int64(opts.Block) >= shardSpan {
		panic(fmt.Sprintf("redisgate: id block %d must be in [1, 2^28)", opts.Block))
	}
	opts.LeaseTimeout = cmp.Or(opts.LeaseTimeout, DefaultIDLeaseTimeout)
	if opts.LeaseTimeout < 0 {
		panic(fmt.Sprintf("redisgate: id lease timeout %s must be positive", opts.LeaseTimeout))
	}
	opts.Prefix = cmp.Or(opts.Prefix, DefaultIDPrefix)
	opts.Clock = cmp.Or(opts.Clock, ports.Clock(ports.SystemClock{}))
	opts.Leases = cmp.Or(opts.Leases, rdb)
	life, stop := context.WithCancel(context.Background())
	g := &IDs{rdb: opts.Leases, block: int64(opts.Block), clock: opts.Clock, attempt: opts.LeaseTimeout,
		life: life, stop: stop, shards: shardState{next: rand.IntN(IDShards)}}
	for k := range g.keys {
		g.keys[k] = opts.Prefix + "{" + idShardTags[k] + "}:"
	}
	return g
}

// Next hands out the next number of the block in hand, leasing the following one
// once it is half spent; it waits on Redis only when both are spent, within ctx.
func (g *IDs) Next(ctx context.Context) (domain.OrderID, error) {
	for {
		now := g.clock.Now().UTC()
		day := dayOf(now) // a midnight, formatted only for a lease: a claim costs no string
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
		if run.err != nil { // that lease tried every shard it could
			return 0, run.err
		}
		// The block may be of a day gone by, or taken by earlier callers: look again.
	}
}

// reuse pops a handed-back ID's number of day, dropping other days'. Called with mu held.
func (g *IDs) reuse(day time.Time) (uint32, bool) {
	for n := len(g.unused); n > 0; n-- {
		id := g.unused[n-1]
		g.unused = g.unused[:n-1]
		if dayOf(id.Time()).Equal(day) {
			return id.Seq(), true
		}
	}
	return 0, false
}

// Unused parks an ID that Next issued and nobody wrote anywhere, for Next to
// reissue within its day with its own second: a refused claim costs no ID.
func (g *IDs) Unused(id domain.OrderID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.unused) < maxUnused {
		g.unused = append(g.unused, id)
	}
}

// Close stops leasing and waits for the lease in flight; Next then serves what
// the issuer holds, and refuses with ErrIDsClosed once that is spent.
func (g *IDs) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.stop()
	g.wg.Wait()
	return nil
}

// dayOf is t's UTC day as its midnight (Go's zero time is one; every UTC day is 24 h).
func dayOf(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }

// IDShards is how many counters a day's sequence is split over: shard k hands out
// k<<28 | n, 1 <= n < 2^28. A constant: processes splitting it differently collide.
const IDShards = 1 << idShardBits

const (
	idShardBits = 4
	seqShift    = 32 - idShardBits
	shardSpan   = int64(1) << seqShift // 1 <= a shard's n < shardSpan
)

// IDShardRetry is how long a shard whose lease failed is passed over when another can serve.
const IDShardRetry = 10 * time.Second

// idShardTags[k] is shard k's hash tag: "s07" when its slot falls in the k-th
// sixteenth of the slot range, else the first "s07.<salt>" that does.
var idShardTags = func() (tags [IDShards]string) {
	const slots = 16384
	for k := range tags {
		lo, hi := k*slots/IDShards, (k+1)*slots/IDShards
		base := fmt.Sprintf("s%02d", k)
		tag := base
		for salt := 0; int(redisschema.Slot(tag)) < lo || int(redisschema.Slot(tag)) >= hi; salt++ {
			tag = base + "." + strconv.Itoa(salt)
		}
		tags[k] = tag
	}
	return tags
}()

// shardState is where the next lease goes: shards in turn, passing over one that
// failed lately, and one spent for the day.
type shardState struct {
	next   int                 // position in turn (see shardStride) of the next shard
	failed [IDShards]time.Time // when the shard's last lease failed; zero if it did not
	spent  [IDShards]time.Time // the day the shard ran out of numbers
}

// shardStride orders the turn: position p is shard p*7 mod 16, so a turn visits
// every shard and the next lies on another master (TestIDShardTurnAlternatesMasters).
const shardStride = 7

// pick returns the shard a lease for day tries next among those not tried: the first
// in turn that did not fail lately, else the first; false when none is left.
func (s *shardState) pick(day time.Time, tried *[IDShards]bool, now time.Time) (k int, ok bool) {
	for _, orFailed := range [...]bool{false, true} {
		for i := range IDShards {
			pos := (s.next + i) % IDShards
			k := pos * shardStride % IDShards
			failedLately := !s.failed[k].IsZero() && now.Sub(s.failed[k]) < IDShardRetry
			if tried[k] || s.spent[k].Equal(day) || failedLately && !orFailed {
				continue
			}
			s.next = (pos + 1) % IDShards
			return k, true
		}
	}
	return 0, false
}

// startLease leases a block for now's day in the background. Called with mu held,
// when no lease is in flight and the issuer is open.
func (g *IDs) startLease(now time.Time) *leaseRun {
	run := &leaseRun{done: make(chan struct{})}
	g.run = run
	g.wg.Go(func() {
		b, err := g.lease(now)
		g.mu.Lock()
		if err == nil {
			g.ahead = b // empty or of another day: only a lease fills it
		}
		run.err = err
		g.run = nil
		g.mu.Unlock()
		close(run.done)
	})
	return run
}

// attempt is one shard's answer to a lease.
type attempt struct {
	k   int
	b   idBlock
	err error
}

// attemptCap bounds one attempt, in LeaseTimeouts: past it the shard is gone.
const attemptCap = 8

// lease takes a block of now's day from the first shard to answer: it asks another
// each time an attempt fails or LeaseTimeout passes, without giving up on those
// still out, so a dead master costs one LeaseTimeout and a slow Redis still answers.
func (g *IDs) lease(now time.Time) (idBlock, error) {
	day := dayOf(now)
	dayName := now.Format("2006:01:02")
	// Cancelled once decided: an attempt still out may yet take a block, unused.
	round, cancel := context.WithCancel(g.life)
	defer cancel()
	answers := make(chan attempt, IDShards) // never blocks a late attempt
	var (
		tried, out [IDShards]bool
		n          int
		lastErr    error
	)
	launch := func() bool {
		g.mu.Lock()
		k, ok := g.shards.pick(day, &tried, time.Now())
		g.mu.Unlock()
		if !ok {
			return false
		}
		tried[k], out[k] = true, true
		n++
		g.wg.Go(func() {
			b, err := g.leaseFrom(round, k, day, g.keys[k]+dayName)
			answers <- attempt{k, b, err}
		})
		return true
	}
	if !launch() {
		return idBlock{}, fmt.Errorf("%w: every shard of %s", ErrSequenceExhausted, dayName)
	}
	hedge := time.NewTimer(g.attempt)
	defer hedge.Stop()
	for n > 0 {
		select {
		case a := <-answers:
			n--
			out[a.k] = false
			g.mu.Lock()
			switch {
			case a.err == nil:
				g.shards.failed[a.k] = time.Time{}
			case errors.Is(a.err, ErrSequenceExhausted):
				g.shards.spent[a.k] = day
			case g.life.Err() == nil:
				g.shards.failed[a.k] = time.Now()
			}
			g.mu.Unlock()
			if a.err == nil {
				return a.b, nil
			}
			if g.life.Err() != nil {
				return idBlock{}, fmt.Errorf("%w: %w", ErrIDsClosed, a.err)
			}
			// Prefer an error that says why a shard did not answer to "exhausted".
			if lastErr == nil || !errors.Is(a.err, ErrSequenceExhausted) {
				lastErr = a.err
			}
		case <-hedge.C:
			// Those still out are slow or gone: pass over them, ask another.
			g.mu.Lock()
			for k, o := range out {
				if o {
					g.shards.failed[k] = time.Now()
				}
			}
			g.mu.Unlock()
		}
		if launch() {
			hedge.Reset(g.attempt)
		}
	}
	return idBlock{}, lastErr
}

// leaseFrom takes a block from shard k's counter key, giving up after attemptCap
// LeaseTimeouts or when ctx ends, whatever the client does: a late block is never used.
func (g *IDs) leaseFrom(ctx context.Context, k int, day time.Time, key string) (idBlock, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptCap*g.attempt)
	defer cancel()
	// EXPIRE rides with every lease, so no crash leaves a counter without a TTL;
	// after the INCRBY, not with it: a parallel pipeliner could run it first, on no key.
	incr := redis.NewIntCmd(ctx, "incrby", key, g.block)
	expire := redis.NewBoolCmd(ctx, "expire", key, int64(counterTTL/time.Second))
	done := make(chan error, 1)
	g.wg.Go(func() {
		err := do(ctx, g.rdb, incr)
		if err == nil {
			err = do(ctx, g.rdb, expire)
		}
		done <- err
	})
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		return idBlock{}, fmt.Errorf("lease order id block from %s: %w", key, err)
	}
	hi := incr.Val()
	lo := hi - g.block + 1
	if lo < 1 {
		return idBlock{}, fmt.Errorf("lease order id block from %s: counter at %d is below the block size", key, hi)
	}
	if lo >= shardSpan {
		return idBlock{}, fmt.Errorf("%w: %s", ErrSequenceExhausted, key)
	}
	last := min(hi, shardSpan-1)
	base := int64(k) << seqShift
	return idBlock{day: day, next: base | lo, last: base | last, half: base | (lo + (last-lo)/2)}, nil
}
