package redisstream

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/ports"
)

// Trimming: a stream must not grow without bound, and trimming must never
// remove an entry that is pending or not yet delivered. Entries are deleted
// in the same MULTI/EXEC that acknowledges them, by ack.lua right after the
// XACK, atomically, so exactly what is finished goes and nothing else. That
// keeps XLEN the number of unfinished entries, which Pending and the stream's
// garbage collection rely on. Two rare cases take a second step (see ackTx):
// a server without the script yet, and a group made anew; a crash between
// the steps leaves acked entries in the stream until a later ack's trim
// passes them, or has them delivered again. The script works out, inside
// Redis and so without a race, how far the stream may be trimmed: up to the
// largest ID acknowledged, but never to the oldest entry still pending in
// the group. Acks mostly arrive in order, and then one XTRIM MINID deletes
// them; entries acked out of order (several workers and instances,
// redeliveries), above an older pending entry, are deleted one by one
// (XDEL). An XDEL of every entry walks a radix-tree node (up to 100 entries)
// from its start for each ID: over half of Redis's time per order. The
// script gets only the smallest and largest ID, and the XACK goes to Redis
// directly: handing a script every ID (Lua makes a string of each, then
// Redis an argument of each again) cost twice the XACK itself. Memory comes
// back a node at a time, once all its entries are deleted. The price: the
// stream is a work queue owned by this one group; a second group reading it
// would lose what this one already finished.

// Ack finishes deliveries whose outcome is committed: their entries are
// acknowledged and deleted (see trimming), per stream, in one round trip.
// Acking again is harmless. It works after Close.
func (q *Queue) Ack(ctx context.Context, ds []ports.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	refs, err := refsOf(ds)
	if err != nil {
		return err
	}
	if err := q.finish(ctx, refs); err != nil {
		return fmt.Errorf("ack %d order entries: %w", len(ds), err)
	}
	return nil
}

// finish acknowledges and deletes entries (see trimming), and lets go of
// them. Each chunk of a stream is an XACK and ack.lua in one MULTI/EXEC, in
// one round trip. Where keys are sharded a transaction stays in one slot, so
// each stream gets one of its own, all sent at once.
func (q *Queue) finish(ctx context.Context, refs []entryRef) error {
	chunks := perStream(refs)
	if !q.perStream || len(chunks) == 1 {
		if err := q.ackTx(ctx, chunks); err != nil {
			return err
		}
		q.in.release(refs)
		return nil
	}
	byKey := map[string][]streamIDs{}
	for _, c := range chunks {
		byKey[c.key] = append(byKey[c.key], c)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, cs := range byKey {
		wg.Go(func() {
			if err := q.ackTx(ctx, cs); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err // what was acked is acked; acking it again is harmless
	}
	q.in.release(refs)
	return nil
}

// ackTx acknowledges and deletes chunks in one MULTI/EXEC.
func (q *Queue) ackTx(ctx context.Context, chunks []streamIDs) error {
	pipe := q.rdb.TxPipeline()
	acks := make([]*redis.IntCmd, len(chunks))
	trims := make([]*redis.Cmd, len(chunks))
	calls := make([]scriptCall, len(chunks))
	for i, c := range chunks {
		acks[i] = pipe.XAck(ctx, c.key, q.opts.Group, c.ids...)
		// EVALSHA: EVAL costs Redis about 90 µs more per call (7.0), a
		// third of a µs per order.
		calls[i] = scriptCall{keys: []string{c.key}, args: []any{q.opts.Group, c.ids[0], c.ids[len(c.ids)-1]}}
		trims[i] = ackScript.EvalSha(ctx, pipe, calls[i].keys, calls[i].args...)
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	// A server that did not have the script yet (the first ack after it
	// started, or a SCRIPT FLUSH): the XACK is done, and the deletion runs
	// now, once the script is loaded. It deletes what is finished whenever
	// it runs; a crash just before it leaves acked entries in the stream
	// until a later ack's trim passes them.
	q.retryNoScript(ctx, ackScript, trims, calls)
	for i := range chunks {
		if err := errors.Join(acks[i].Err(), trims[i].Err()); err != nil {
			return err
		}
	}
	// The group has not delivered these IDs (it was made anew): they are
	// finished all the same, and deleted alone, as XDEL alone always did. A
	// crash before this leaves them to be delivered again: harmless.
	pipe = q.rdb.Pipeline()
	for i, c := range chunks {
		if n, _ := trims[i].Int(); n < 0 {
			pipe.XDel(ctx, c.key, c.ids...)
		}
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

func refsOf(ds []ports.Delivery) ([]entryRef, error) {
	refs := make([]entryRef, len(ds))
	for i, d := range ds {
		r, err := parseRef(d.Ref)
		if err != nil {
			return nil, err
		}
		refs[i] = r
	}
	return refs, nil
}
