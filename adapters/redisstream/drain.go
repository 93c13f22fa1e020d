package redisstream

import (
	"context"
	"errors"
	"fmt"

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
func (q *Queue) drain(ctx context.Context, max int) (finished bool, err error) {
	snap := q.streamsIn(stateReading)
	todo := q.streamsIn(stateDraining)
	if len(snap) > 0 {
		pipe := q.rdb.Pipeline()
		cmds := make([]*redis.XMessageSliceCmd, len(snap))
		for i, s := range snap {
			cmds[i] = pipe.XRevRangeN(ctx, s.key, "+", "-", 1)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return false, fmt.Errorf("find where order streams end: %w", err)
		}
		for i, s := range snap {
			var last string
			if m := cmds[i].Val(); len(m) > 0 {
				last = m[0].ID
			}
			s.drainUpTo(last)
			if s.state == stateDraining {
				todo = append(todo, s)
			}
		}
	}
	if len(todo) == 0 {
		return true, nil
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.XStreamSliceCmd, len(todo))
	for i := range todo {
		cmds[i] = pipe.XReadGroup(ctx, q.readArgs(newEntriesOf(todo[i:i+1]), max, -1))
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	for i, s := range todo {
		res, err := cmds[i].Result()
		switch {
		case errors.Is(err, redis.Nil) || isNoGroup(err):
			s.drained()
			continue
		case err != nil:
			return false, fmt.Errorf("drain %s: %w", s.key, err)
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
				return false, err
			}
		}
	}
	return false, nil
}
