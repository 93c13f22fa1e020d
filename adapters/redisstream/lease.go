package redisstream

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// renewLoop keeps this process's hold on the entries it has read and not
// finished (buffered or with a worker): without it, a batch retried through
// a database outage longer than MinIdle would be claimed by another consumer,
// or by this one's own claimer, and its delivery count would climb towards
// the worker's dead-letter limit while nothing is wrong with it. A process
// that dies stops renewing, which is what lets the others take over.
func (q *Queue) renewLoop(ctx context.Context) {
	defer close(q.renewed)
	t := time.NewTicker(q.renewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := q.renew(ctx); err != nil && ctx.Err() == nil {
			q.opts.Log.Warn().Err(err).
				Msg("renewing the hold on in-flight order entries failed; if it lasts longer than MinIdle another consumer may take them over (harmless: writes are idempotent)")
		}
	}
}

// renew resets the idle time of every held entry still pending to this
// consumer (renew.lua) and lets go of those that are not.
func (q *Queue) renew(ctx context.Context) error {
	q.mu.Lock()
	refs := make([]entryRef, 0, len(q.held))
	for _, r := range q.held {
		refs = append(refs, r)
	}
	q.mu.Unlock()
	if len(refs) == 0 {
		return nil
	}
	var calls []scriptCall
	for key, ids := range byStream(refs) {
		for len(ids) > 0 {
			n := min(len(ids), scriptChunk)
			args := make([]any, 0, n+2)
			args = append(args, q.opts.Group, q.opts.Consumer)
			for _, id := range ids[:n] {
				args = append(args, id)
			}
			calls = append(calls, scriptCall{keys: []string{key}, args: args})
			ids = ids[n:]
		}
	}
	ctx, cancel := context.WithTimeout(ctx, q.renewEvery)
	defer cancel()
	cmds, err := runScripts(ctx, q.rdb, renewScript, calls)
	var lost []string
	for i, c := range cmds {
		ids, cerr := c.StringSlice()
		if cerr != nil {
			continue
		}
		for _, id := range ids {
			lost = append(lost, entryRef{calls[i].keys[0], id}.String())
		}
	}
	if len(lost) > 0 {
		q.mu.Lock()
		for _, ref := range lost {
			delete(q.held, ref)
		}
		q.mu.Unlock()
	}
	return err
}

// scriptCall is one run of a script: its KEYS and ARGV.
type scriptCall struct {
	keys []string
	args []any
}

// runScripts runs one script for each call in one pipelined round trip, and
// returns the commands in call order with the first error. A pipeline cannot
// fall back from EVALSHA to EVAL command by command the way Script.Run does,
// so calls the server has no cached script for are sent again with EVAL.
// Calls on different slots are fine: a cluster pipeline splits by node.
func runScripts(ctx context.Context, rdb redis.UniversalClient, s *redis.Script, calls []scriptCall) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(calls))
	if len(calls) == 0 {
		return cmds, nil
	}
	pipe := rdb.Pipeline()
	for i, c := range calls {
		cmds[i] = s.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	var again []int
	for i, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe := rdb.Pipeline()
		for _, i := range again {
			cmds[i] = s.Eval(ctx, pipe, calls[i].keys, calls[i].args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}
