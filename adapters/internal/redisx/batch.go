package redisx

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Do and Send send the claim path's Redis commands the cheapest way the
// client allows: through go-redis's automatic pipeliner when it is one
// (the commands of every concurrent claim share one write and one read), in
// one ordinary pipeline otherwise. Either way the caller's context bounds the
// wait: a claim never waits on Redis past its budget.
//
// Do runs cmds and returns once each has an answer or ctx ends, whichever is
// first; each command's own error is on the command. It returns ctx.Err()
// when ctx ended first: the commands may still run afterwards (they are on
// the wire), so a caller that cares undoes or reports an unknown outcome.
//
// On an asynchronous AutoPipeliner the commands are submitted together, so
// they usually travel in the same batch (one round trip for all of them,
// shared with other callers' commands); on any other client they go as one
// pipeline, or as a single command when there is one.
func Do(ctx context.Context, c redis.UniversalClient, cmds ...redis.Cmder) error {
	if ap, ok := c.(*redis.AutoPipeliner); ok && !ap.IsBlocking() {
		var futures [4]redis.AutoFuture
		fs := futures[:0]
		for _, cmd := range cmds {
			fs = append(fs, ap.Submit(ctx, cmd))
		}
		for _, f := range fs {
			if err := f.WaitContext(ctx); err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
		}
		return nil
	}
	if len(cmds) == 1 {
		_ = c.Process(ctx, cmds[0])
		return ctx.Err()
	}
	pipe := c.Pipeline()
	for _, cmd := range cmds {
		_ = pipe.Process(ctx, cmd)
	}
	_, _ = pipe.Exec(ctx)
	return ctx.Err()
}

// Send queues cmds without waiting for their answers when c is an
// asynchronous AutoPipeliner (they travel with the next batch, usually the
// caller's next command's, and are not dropped when ctx ends), and runs them
// like Do, bounded by ctx, otherwise. For writes whose outcome the caller
// does not need, such as pushing a session's expiry back: on the pipelined
// path they cost the request no round trip of its own.
func Send(ctx context.Context, c redis.UniversalClient, cmds ...redis.Cmder) {
	if ap, ok := c.(*redis.AutoPipeliner); ok && !ap.IsBlocking() {
		bg := context.WithoutCancel(ctx)
		for _, cmd := range cmds {
			ap.Submit(bg, cmd)
		}
		return
	}
	_ = Do(ctx, c, cmds...)
}
