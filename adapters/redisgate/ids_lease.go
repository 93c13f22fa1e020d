package redisgate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/adapters/redisschema"
)

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
	spent  [IDShards]date      // the day the shard ran out of numbers
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
func (s *shardState) pick(day date, tried *[IDShards]bool, now time.Time) (k int, ok bool) {
	fallback := -1
	for i := range IDShards {
		pos := (s.next + i) % IDShards
		k := pos * shardStride % IDShards
		if tried[k] || s.spent[k] == day {
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
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
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
	}()
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
// still out: a dead master costs the lease one LeaseTimeout, and a Redis
// that is only slow (a stampede's first lease waits behind thousands of
// claims, and took 300 ms on a loaded test machine) still answers it.
func (g *IDs) lease(now time.Time) (idBlock, error) {
	day := dateOf(now)
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
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			b, err := g.leaseFrom(round, k, day, g.keys[k]+dayName)
			answers <- attempt{k, b, err}
		}()
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
			if launch() {
				hedge.Reset(g.attempt)
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
			if launch() {
				hedge.Reset(g.attempt)
			}
		}
	}
	return idBlock{}, lastErr
}

// leaseFrom takes a block from shard k's counter key, giving up after
// attemptCap LeaseTimeouts or when ctx ends, whatever the client does: a
// client that ignores its context's deadline (go-redis without
// ContextTimeoutEnabled waits for its ReadTimeout) finishes in the
// background, and the block it may have taken is never used.
func (g *IDs) leaseFrom(ctx context.Context, k int, day date, key string) (idBlock, error) {
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
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		err := redisx.Do(ctx, g.rdb, incr)
		if err == nil {
			err = incr.Err()
		}
		if err == nil {
			err = redisx.Do(ctx, g.rdb, expire)
		}
		if err == nil {
			err = expire.Err()
		}
		done <- err
	}()
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
