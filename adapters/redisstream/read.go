package redisstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/ports"
)

// Receive hands out up to max orders: this consumer's own entries left pending from before, then entries
// idle longer than MinIdle, then new ones. After Close it reads each stream up to where it ended then,
// claims nothing, and returns ports.ErrQueueClosed.
func (q *Queue) Receive(ctx context.Context, max int) ([]ports.Delivery, error) {
	if max <= 0 {
		max = 1
	}
	select {
	case q.recv <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-q.recv }()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if ds := q.in.take(max); len(ds) > 0 {
			return ds, nil
		}
		finished, err := q.fill(ctx, max)
		if err != nil {
			return nil, cmp.Or(ctx.Err(), err)
		}
		if finished {
			return nil, ports.ErrQueueClosed
		}
	}
}

// fill reads from Redis into the buffer, in order of precedence; finished: closed, and nothing is left.
func (q *Queue) fill(ctx context.Context, max int) (finished bool, err error) {
	closed := q.closed()
	now := time.Now()
	// A closed queue looks for streams once more, so a new voucher's first claims are drained too.
	if (!closed && !now.Before(q.rd.nextDiscover)) || (closed && !q.rd.discoveredAfterClose) {
		if err := q.discover(ctx, now); err != nil {
			if !q.perStream {
				return false, err
			}
			// The live set or registry's master failed: the known streams are read on.
			q.opts.Log.Warn().Err(err).Msg("discovering order streams failed; the known streams are read on")
			q.rd.nextDiscover = now.Add(streamRetryMax)
		} else {
			q.rd.discoveredAfterClose = closed
		}
	}
	if err := q.adopt(ctx); err != nil {
		return false, err
	}
	// Every stream in stateRecovering is past it once this answers 0.
	if n, err := q.readOwnPending(ctx, max); err != nil || n > 0 {
		return false, err
	}
	if closed {
		return q.drain(ctx, max)
	}
	if n, err := q.claim(ctx, max, now); err != nil || n > 0 {
		return false, err
	}
	return false, q.readNew(ctx, max)
}

// streamsIn lists the streams in one of the states (all, given none) in a stable order.
func (q *Queue) streamsIn(states ...streamState) []*stream {
	var out []*stream
	for _, s := range q.rd.streams {
		if len(states) == 0 || slices.Contains(states, s.state) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *stream) int {
		return cmp.Or(cmp.Compare(a.vid, b.vid), strings.Compare(a.tag, b.tag))
	})
	return out
}

// readNew reads entries never delivered, waiting up to one Block for the first, then lingers.
func (q *Queue) readNew(ctx context.Context, max int) error {
	ss := ready(q.streamsIn(stateReading), time.Now())
	if len(ss) == 0 {
		q.idle(ctx)
		return nil
	}
	n, err := q.readNewOnce(ctx, ss, max, q.opts.Block)
	if err != nil || n == 0 || n >= max || q.opts.Linger <= 0 {
		return err
	}
	select {
	case <-q.after(q.opts.Linger):
	case <-q.done:
		return nil // what was read stays buffered for Receive
	case <-ctx.Done():
		return nil
	}
	if ss = ready(q.streamsIn(stateReading), time.Now()); len(ss) == 0 {
		return nil
	}
	_, err = q.readNewOnce(ctx, ss, max-n, -1)
	return err
}

// readNewOnce reads up to max new entries of each of ss, waiting up to block (none when negative), and
// reports how many came. Where keys are sharded each stream is read without waiting (one pipeline), then
// one in turn is waited on; every result is taken in before an error is looked at.
func (q *Queue) readNewOnce(ctx context.Context, ss []*stream, max int, block time.Duration) (int, error) {
	if !q.perStream || len(ss) == 1 {
		return q.acceptNew(ctx, ss, q.rdb.XReadGroup(ctx, q.readArgs(ss, ">", max, block)))
	}
	var n int
	var errs []error
	for i, c := range q.readEach(ctx, ss, max) {
		k, err := q.acceptNew(ctx, ss[i:i+1], c)
		n += k
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil || n > 0 || block < 0 {
		return n, err
	}
	i := q.rd.rotate % len(ss)
	q.rd.rotate++
	return q.acceptNew(ctx, ss[i:i+1], q.rdb.XReadGroup(ctx, q.readArgs(ss[i:i+1], ">", max, block)))
}

// readEach reads up to max new entries of each of ss without waiting, one command per stream in one pipeline.
func (q *Queue) readEach(ctx context.Context, ss []*stream, max int) []*redis.XStreamSliceCmd {
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.XStreamSliceCmd, len(ss))
	for i := range ss {
		cmds[i] = pipe.XReadGroup(ctx, q.readArgs(ss[i:i+1], ">", max, -1))
	}
	_, _ = pipe.Exec(ctx)
	return cmds
}

// acceptNew takes in a read of new entries of ss and reports how many it carried.
func (q *Queue) acceptNew(ctx context.Context, ss []*stream, cmd *redis.XStreamSliceCmd) (int, error) {
	res, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if isNoGroup(err) {
		// A stream or its group is gone: discover and make the groups again before the next read.
		for _, s := range ss {
			s.groupLost()
		}
		q.rd.nextDiscover = time.Time{}
		return 0, nil
	}
	if err != nil {
		// Where keys are sharded ss is one stream, which streamError rests; elsewhere err is returned.
		return 0, q.streamError(ss[0], fmt.Errorf("read new order entries: %w", err))
	}
	for _, s := range ss {
		q.streamAnswered(s) // a no-op on a single Redis, where no stream rests
	}
	byKey := make(map[string]*stream, len(ss))
	for _, s := range ss {
		byKey[s.key] = s
	}
	var n int
	var errs []error
	for _, r := range res {
		n += len(r.Messages)
		s := byKey[r.Stream]
		if s == nil || len(r.Messages) == 0 {
			continue
		}
		if _, err := q.accept(ctx, s, r.Messages, false); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// streamError: where keys are sharded the stream rests (doubling per failure in a row) and nil lets
// the caller go on with the others; on a single Redis the error is returned as it is.
func (q *Queue) streamError(s *stream, err error) error {
	if !q.perStream {
		return err
	}
	s.fails++
	s.retryAt = time.Now().Add(min(streamRetryMin<<min(s.fails-1, 8), streamRetryMax))
	if s.fails == 1 {
		q.opts.Log.Warn().Err(err).Str("stream", s.key).
			Msg("an order stream cannot be read (its Redis master down or failing over?); the other streams are read on and this one is tried again")
	}
	return nil
}

func (q *Queue) streamAnswered(s *stream) {
	if s.fails > 0 {
		q.opts.Log.Info().Str("stream", s.key).Msg("an order stream answers again")
	}
	s.fails, s.retryAt = 0, time.Time{}
}

// ready drops from ss the streams resting after a failure.
func ready(ss []*stream, now time.Time) []*stream {
	return slices.DeleteFunc(ss, func(s *stream) bool { return s.resting(now) })
}

// idle waits, with no stream to read, for a Publish, Close, ctx, the next discovery or one Block.
func (q *Queue) idle(ctx context.Context) {
	d := min(q.opts.Block, time.Until(q.rd.nextDiscover))
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-q.wake:
	case <-q.done:
	case <-ctx.Done():
	}
}

// readArgs builds an XREADGROUP of ss after id (">": never delivered); block < 0 sends no BLOCK
// (go-redis sends BLOCK 0, forever, for a zero Block).
func (q *Queue) readArgs(ss []*stream, id string, count int, block time.Duration) *redis.XReadGroupArgs {
	keys := make([]string, 2*len(ss))
	for i, s := range ss {
		keys[i], keys[len(ss)+i] = s.key, id
	}
	return &redis.XReadGroupArgs{
		Group: q.opts.Group, Consumer: q.opts.Consumer, Streams: keys, Count: int64(count), Block: block,
	}
}

// accept buffers and holds read entries that decode, and dead-letters the rest; redelivered ones get
// their delivery counts looked up. It reports how many it took.
func (q *Queue) accept(ctx context.Context, s *stream, msgs []redis.XMessage, redelivered bool) (int, error) {
	fresh := q.in.notHeld(s.key, msgs)
	if len(fresh) == 0 {
		return 0, nil
	}
	attempts := slices.Repeat([]int{1}, len(fresh))
	if redelivered {
		var err error
		if fresh, attempts, err = q.deliveryCounts(ctx, s, fresh); err != nil {
			return 0, err
		}
	}
	good := make([]buffered, 0, len(fresh))
	poison := make([]error, len(fresh)) // why fresh[i] does not decode
	for i, m := range fresh {
		o, err := redisschema.DecodeOrder(s.vid, m)
		if poison[i] = err; err != nil {
			continue
		}
		r := entryRef{s.key, m.ID}
		good = append(good, buffered{ports.Delivery{Order: o, Ref: r.String(), Attempts: attempts[i]}, r})
	}
	// Held before the poison is dealt with, so an error there cannot lose them.
	q.in.hold(good)
	for i, cause := range poison {
		if cause == nil {
			continue
		}
		if err := q.setAsidePoison(ctx, s, fresh[i], attempts[i], cause); err != nil {
			return len(good), err // it stays pending and is claimed again after MinIdle
		}
	}
	return len(fresh), nil
}

func isNoGroup(err error) bool { return redis.HasErrorPrefix(err, "NOGROUP") }

// isReplyError tells an error Redis answered (a wrong key type, say) from a failure to reach it.
func isReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.Nil)
}

// readOwnPending re-reads, from ID 0, what the group counts as delivered to this consumer before.
func (q *Queue) readOwnPending(ctx context.Context, max int) (int, error) {
	now := time.Now()
	for _, s := range q.streamsIn() {
		for s.state == stateRecovering && !s.resting(now) {
			res, err := q.rdb.XReadGroup(ctx, q.readArgs([]*stream{s}, s.cursor, max, -1)).Result()
			if errors.Is(err, redis.Nil) {
				err = nil
			}
			if isNoGroup(err) {
				s.groupLost() // a group made anew has nothing pending
				break
			}
			if err != nil {
				if err := q.streamError(s, fmt.Errorf("re-read own pending entries of %s: %w", s.key, err)); err != nil {
					return 0, err
				}
				break // tried again once rested
			}
			q.streamAnswered(s)
			if len(res) == 0 || len(res[0].Messages) == 0 {
				s.recovered()
				break
			}
			msgs := res[0].Messages
			n, err := q.accept(ctx, s, msgs, true)
			if err != nil {
				return 0, err
			}
			// Moved on only once accepted: after an error the same entries are read again.
			s.cursor = msgs[len(msgs)-1].ID
			if n > 0 {
				return n, nil
			}
		}
	}
	return 0, nil
}

// claim takes over entries idle longer than MinIdle; a full pass over a stream rests for ClaimInterval.
func (q *Queue) claim(ctx context.Context, max int, now time.Time) (int, error) {
	for _, s := range ready(q.streamsIn(stateReading), now) {
		if now.Before(s.nextClaim) {
			continue
		}
		msgs, next, err := q.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: s.key, Group: q.opts.Group, Consumer: q.opts.Consumer,
			MinIdle: q.opts.MinIdle, Start: s.claimFrom, Count: int64(max),
		}).Result()
		if isNoGroup(err) {
			s.groupLost()
			continue
		}
		if err != nil {
			if err := q.streamError(s, fmt.Errorf("claim idle entries of %s: %w", s.key, err)); err != nil {
				return 0, err
			}
			continue
		}
		q.streamAnswered(s)
		if next == "" || next == "0-0" {
			s.claimFrom, s.nextClaim = "0-0", now.Add(q.opts.ClaimInterval)
		} else {
			s.claimFrom = next
		}
		if n, err := q.accept(ctx, s, msgs, true); err != nil || n > 0 {
			return n, err
		}
	}
	return 0, nil
}

// deliveryCounts looks up each entry's delivery count, dropping entries no longer pending.
func (q *Queue) deliveryCounts(ctx context.Context, s *stream, msgs []redis.XMessage) ([]redis.XMessage, []int, error) {
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.XPendingExtCmd, len(msgs))
	for i, m := range msgs {
		cmds[i] = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: s.key, Group: q.opts.Group, Start: m.ID, End: m.ID, Count: 1,
		})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, fmt.Errorf("delivery counts of %s: %w", s.key, err)
	}
	kept := msgs[:0:0]
	counts := make([]int, 0, len(msgs))
	for i, m := range msgs {
		p := cmds[i].Val()
		if len(p) == 0 || p[0].ID != m.ID {
			continue
		}
		kept = append(kept, m)
		counts = append(counts, int(p[0].RetryCount))
	}
	return kept, counts, nil
}

// drain reads, after Close, what each stream held when first drained; an entry past that end a read
// returns anyway is handed out too, as it is delivered to this consumer already.
func (q *Queue) drain(ctx context.Context, max int) (finished bool, err error) {
	if len(q.streamsIn(stateReading, stateDraining)) == 0 {
		return true, nil
	}
	now := time.Now()
	var errs []error
	snap := ready(q.streamsIn(stateReading), now)
	todo := ready(q.streamsIn(stateDraining), now)
	pipe := q.rdb.Pipeline()
	ends := make([]*redis.XMessageSliceCmd, len(snap))
	for i, s := range snap {
		ends[i] = pipe.XRevRangeN(ctx, s.key, "+", "-", 1)
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	for i, s := range snap {
		m, err := ends[i].Result()
		if err != nil {
			errs = append(errs, q.streamError(s, fmt.Errorf("find where %s ends: %w", s.key, err)))
			continue
		}
		var last string
		if len(m) > 0 {
			last = m[0].ID
		}
		s.drainUpTo(last)
		if s.state == stateDraining {
			todo = append(todo, s)
		}
	}
	cmds := q.readEach(ctx, todo, max)
	for i, s := range todo {
		res, err := cmds[i].Result()
		switch {
		case errors.Is(err, redis.Nil) || isNoGroup(err):
			s.drained()
			continue
		case err != nil:
			errs = append(errs, q.streamError(s, fmt.Errorf("drain %s: %w", s.key, err)))
			continue
		}
		var msgs []redis.XMessage
		if len(res) > 0 {
			msgs = res[0].Messages
		}
		if len(msgs) == 0 || cmpID(msgs[len(msgs)-1].ID, s.drainTo) >= 0 {
			s.drained()
		}
		if _, err := q.accept(ctx, s, msgs, false); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	if len(todo) == 0 && len(snap) == 0 {
		// Every stream left rests after a failure: wait for the first rather than spin.
		ss := q.streamsIn(stateReading, stateDraining)
		first := slices.MinFunc(ss, func(a, b *stream) int { return a.retryAt.Compare(b.retryAt) })
		t := time.NewTimer(time.Until(first.retryAt))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return false, nil
}
