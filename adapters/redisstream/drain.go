package redisstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Close stops Publish and the renewal of held entries; Receive hands out
// what the streams held at that time, then returns ports.ErrQueueClosed.
// Ack and DeadLetter go on working, so the batch in flight can be finished;
// what is left unacked is re-read at the next start, or claimed by another
// instance after MinIdle (keep the shutdown deadline below it, or a batch
// still being written may be taken over: harmless, the writes are idempotent).
func (q *Queue) Close() error {
	q.closeMu.Lock()
	if q.closed() {
		q.closeMu.Unlock()
		return nil
	}
	close(q.done)
	q.closeMu.Unlock()
	q.stopRenew()
	<-q.renewed
	return nil
}

// drain reads, after Close, what each stream held when the queue was closed
// (a stream's end is taken the first time it is drained), so a graceful stop
// leaves nothing behind that was there, without chasing what other instances'
// claims keep appending. An entry past that end that one read returns anyway
// is handed out too: it is delivered to this consumer already. Every command
// names one stream, so the pipelines are fine on a cluster.
//
// As in reading, every result is taken in before an error is returned, and
// on a cluster a stream whose master fails rests while the others drain.
func (q *Queue) drain(ctx context.Context, max int) (finished bool, err error) {
	if len(q.streamsIn(stateReading, stateDraining)) == 0 {
		return true, nil
	}
	now := time.Now()
	var errs []error
	snap := ready(q.streamsIn(stateReading), now)
	todo := ready(q.streamsIn(stateDraining), now)
	if len(snap) > 0 {
		pipe := q.rdb.Pipeline()
		cmds := make([]*redis.XMessageSliceCmd, len(snap))
		for i, s := range snap {
			cmds[i] = pipe.XRevRangeN(ctx, s.key, "+", "-", 1)
		}
		_, _ = pipe.Exec(ctx) // each command's error is looked at below
		for i, s := range snap {
			m, err := cmds[i].Result()
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
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.XStreamSliceCmd, len(todo))
	for i := range todo {
		cmds[i] = pipe.XReadGroup(ctx, q.readArgs(newEntriesOf(todo[i:i+1]), max, -1))
	}
	if len(todo) > 0 {
		_, _ = pipe.Exec(ctx) // each command's error is looked at below
	}
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
		if len(msgs) == 0 || !idLess(msgs[len(msgs)-1].ID, s.drainTo) {
			s.drained()
		}
		if len(msgs) > 0 {
			if _, err := q.accept(ctx, s, msgs, false); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	if len(todo) == 0 && len(snap) == 0 {
		// Every stream left rests after a failure: wait for the first to
		// be due rather than spin.
		q.rest(ctx, q.streamsIn(stateReading, stateDraining))
	}
	return false, nil
}

// rest waits until the retry of the first of ss is due, or ctx ends.
func (q *Queue) rest(ctx context.Context, ss []*stream) {
	var due time.Time
	for _, s := range ss {
		if due.IsZero() || s.retryAt.Before(due) {
			due = s.retryAt
		}
	}
	t := time.NewTimer(time.Until(due))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
