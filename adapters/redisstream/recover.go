package redisstream

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file is how entries whose consumer stopped are delivered again: this
// consumer's own leftovers from before a restart (re-read from ID 0), and
// other consumers' entries left idle longer than MinIdle (XAUTOCLAIM). Both
// come with their delivery counts, so the worker can set aside an entry its
// consumers keep dying on.

// readOwnPending re-reads, from ID 0, the entries the group still counts as
// delivered to this consumer: what this consumer name held when its process
// stopped. It runs once for each stream this Queue takes on, before any new
// entry of it is read; it skips entries this process already holds.
func (q *Queue) readOwnPending(ctx context.Context, max int) (int, error) {
	now := time.Now()
	for _, s := range q.sorted() {
		for s.state == stateRecovering && !s.resting(now) {
			msgs, err := q.read(ctx, s, s.cursor, max)
			if isNoGroup(err) {
				// A group made anew has no pending entries of anyone.
				s.groupLost()
				break
			}
			if err != nil {
				if err := q.streamError(s, fmt.Errorf("re-read own pending entries of %s: %w", s.key, err)); err != nil {
					return 0, err
				}
				break // the next stream; this one is tried again once rested
			}
			q.streamAnswered(s)
			if len(msgs) == 0 {
				s.recovered()
				break
			}
			n, err := q.accept(ctx, s, msgs, true)
			if err != nil {
				return 0, err
			}
			// Moved on only once accepted: after an error the same entries are
			// read again rather than left to the claimer.
			s.cursor = msgs[len(msgs)-1].ID
			if n > 0 {
				return n, nil
			}
		}
	}
	return 0, nil
}

// claim takes over entries other consumers (or this one, having lost them
// between read and hand-out) left idle longer than MinIdle. Each stream is
// scanned with a cursor; a full pass rests for ClaimInterval.
func (q *Queue) claim(ctx context.Context, max int, now time.Time) (int, error) {
	for _, s := range ready(q.streamsIn(stateReading), now) {
		if now.Before(s.nextClaim) {
			continue
		}
		msgs, next, err := q.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream:   s.key,
			Group:    q.opts.Group,
			Consumer: q.opts.Consumer,
			MinIdle:  q.opts.MinIdle,
			Start:    s.claimFrom,
			Count:    int64(max),
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
		if len(msgs) == 0 {
			continue
		}
		if n, err := q.accept(ctx, s, msgs, true); err != nil || n > 0 {
			return n, err
		}
	}
	return 0, nil
}

// deliveryCounts looks up each entry's delivery count (XPENDING of that one
// ID, pipelined). Entries no longer pending (finished by another consumer
// meanwhile) are dropped.
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
