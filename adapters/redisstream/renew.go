package redisstream

import (
	"context"
	"time"
)

// renewLoop keeps this process's hold on the entries it has read and not
// finished (buffered or with a worker): without it, a batch retried through
// a database outage longer than MinIdle would be claimed by another consumer,
// or by this one's own claimer, and its delivery count would climb towards
// the worker's dead-letter limit while nothing is wrong with it. A process
// that dies stops renewing, which is what lets the others take over.
func (q *Queue) renewLoop(ctx context.Context) {
	every(ctx, q.renewEvery, q.renewed, func(ctx context.Context) {
		if err := q.renew(ctx); err != nil && ctx.Err() == nil {
			q.opts.Log.Warn().Err(err).
				Msg("renewing the hold on in-flight order entries failed; if it lasts longer than MinIdle another consumer may take them over (harmless: writes are idempotent)")
		}
	})
}

// every runs f once per period until ctx ends, then closes done: the loop of
// both renewals (the held entries' here, the consumer name's lease).
func every(ctx context.Context, period time.Duration, done chan<- struct{}, f func(context.Context)) {
	defer close(done)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f(ctx)
	}
}

// renew resets the idle time of every held entry still pending to this
// consumer (renew.lua) and lets go of those that are not.
func (q *Queue) renew(ctx context.Context) error {
	refs := q.in.heldRefs()
	if len(refs) == 0 {
		return nil
	}
	calls := perStreamCalls(refs, q.opts.Group, q.opts.Consumer)
	ctx, cancel := context.WithTimeout(ctx, q.renewEvery)
	defer cancel()
	cmds, err := q.runScripts(ctx, renewScript, calls)
	var lost []entryRef
	for i, c := range cmds {
		ids, cerr := c.StringSlice()
		if cerr != nil {
			continue
		}
		for _, id := range ids {
			lost = append(lost, entryRef{calls[i].keys[0], id})
		}
	}
	if len(lost) > 0 {
		q.in.release(lost)
	}
	return err
}
