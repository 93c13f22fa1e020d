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
	// before asking the next one too (default 250 ms; see lease). An
	// attempt is abandoned after eight of them.
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

type unusedSeq struct {
	day time.Time
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
		// Compared as its midnight, formatted only for a lease: a claim then
		// costs no string.
		day := dayOf(now)
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
func (g *IDs) reuse(day time.Time) (uint32, bool) {
	for n := len(g.unused); n > 0; n-- {
		u := g.unused[n-1]
		g.unused = g.unused[:n-1]
		if u.day.Equal(day) {
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
	u := unusedSeq{day: dayOf(id.Time()), seq: id.Seq()}
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

// dayOf is t's UTC calendar day, as the time of its midnight: Go's clock
// counts every UTC day as 24 h from the zero time, a UTC midnight.
func dayOf(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }

// IDShards is how many counters a day's sequence is split over: shard k hands
// out the sequence numbers k<<28 | n, 1 <= n < 2^28. Sixteen spread over any
// cluster of up to sixteen masters (their tags' slots fall one in each
// sixteenth of the slot range), and 2^28 numbers a shard a day is far more
// than a shard is asked for. A constant, not an option: every process sharing
// a Redis must split the sequence alike, or two would hand out the same
// numbers.
const IDShards = 1 << idShardBits

const (
	idShardBits = 4
	seqShift    = 32 - idShardBits
	// shardSpan bounds a shard's n: 1 <= n < shardSpan.
	shardSpan = int64(1) << seqShift
)

// IDShardRetry is how long a shard whose lease failed is passed over when
// another shard can serve: a dead master then costs one short attempt per
// instance this often, not one per lease.
const IDShardRetry = 10 * time.Second

// idShardTags[k] is shard k's hash tag: "s07" when its slot falls in the k-th
// sixteenth of the slot range, else the first "s07.<salt>" that does. A pure
// function of k, so every process and every version names the same counters;
// TestIDShardKeysAreFixed pins it.
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

// shardState is where the next lease goes: shards are taken in turn, so
// leases spread over the counters (and masters); one that failed lately is
// passed over, one spent for the day is not tried again that day.
type shardState struct {
	next   int                 // the position in turn (see shardStride) of the next shard
	failed [IDShards]time.Time // when the shard's last lease failed; zero if it did not
	spent  [IDShards]time.Time // the day the shard ran out of numbers
}

// shardStride orders the turn: position p is shard p*7 mod 16. Odd, so a
// turn visits every shard; and chosen so that shards next in turn lie on
// different masters of a cluster of 3 to 6 masters with even slot ranges
// (on 2, twice a turn they do not): a lease that meets a dead master tries
// a live one next, instead of that master's next shard.
// TestIDShardTurnAlternatesMasters checks it against the tags' slots.
const shardStride = 7

// pick returns the shard the next attempt of a lease for day tries, skipping
// those tried already: the first in turn that did not fail lately, else the
// first in turn at all (every shard failing is no reason to stop trying).
// ok is false when every shard left is spent or tried.
func (s *shardState) pick(day time.Time, tried *[IDShards]bool, now time.Time) (k int, ok bool) {
	fallback := -1
	for i := range IDShards {
		pos := (s.next + i) % IDShards
		k := pos * shardStride % IDShards
		if tried[k] || s.spent[k].Equal(day) {
			continue
		}
		if s.failed[k].IsZero() || now.Sub(s.failed[k]) >= IDShardRetry {
			s.next = (pos + 1) % IDShards
			return k, true
		}
		if fallback < 0 {
			fallback = pos
		}
	}
	if fallback < 0 {
		return 0, false
	}
	s.next = (fallback + 1) % IDShards
	return fallback * shardStride % IDShards, true
}

// startLease starts leasing a block for now's day in the background. Called
// with mu held, when no lease is in flight and the issuer is open.
func (g *IDs) startLease(now time.Time) *leaseRun {
	run := &leaseRun{done: make(chan struct{})}
	g.run = run
	g.wg.Go(func() {
		b, err := g.lease(now)
		g.mu.Lock()
		if err == nil {
			// ahead is empty or of another day here: no lease ran since it
			// was found so, and only a lease fills it.
			g.ahead = b
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

// attemptCap bounds one attempt, in LeaseTimeouts (2 s by default): past it
// the shard is not slow but gone.
const attemptCap = 8

// lease takes a block of now's day from the first shard to answer. It asks
// one shard, and another each time an attempt fails or LeaseTimeout passes
// without an answer, each shard at most once, without giving up on those
// still out: a dead master costs the lease one LeaseTimeout, far under a
// claim's budget, and a Redis that is only slow (a stampede's first lease
// waits behind thousands of claims, and took 300 ms on a loaded test
// machine) still answers it.
func (g *IDs) lease(now time.Time) (idBlock, error) {
	day := dayOf(now)
	dayName := now.Format("2006:01:02")
	// Cancelled once the lease is decided: an attempt still out then may
	// yet take its block, which is never used, which only spends it.
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
			// An exhausted shard is no failure of the others: keep the
			// error that says why a shard did not answer, if one did not.
			if lastErr == nil || !errors.Is(a.err, ErrSequenceExhausted) {
				lastErr = a.err
			}
		case <-hedge.C:
			// The shards still out are slow or gone: pass over them for a
			// while (an answer clears that), and ask another meanwhile.
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

// leaseFrom takes a block from shard k's counter key, giving up after
// attemptCap LeaseTimeouts or when ctx ends, whatever the client does: a
// client that ignores its context's deadline (go-redis without
// ContextTimeoutEnabled waits for its ReadTimeout) finishes in the
// background, and the block it may have taken is never used.
func (g *IDs) leaseFrom(ctx context.Context, k int, day time.Time, key string) (idBlock, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptCap*g.attempt)
	defer cancel()
	// EXPIRE rides along with every lease, so a crash after the first INCRBY
	// cannot leave a counter without a TTL.
	// Sent one after the other, not together: a pipeliner that runs batches
	// in parallel (Unordered) could run the EXPIRE first, on no key. A lease
	// is one claim in Block, so the second round trip costs nothing much.
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
