package redisstream

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
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
	txs := perStream(refs)
	if !q.perStream {
		txs = [][]streamIDs{slices.Concat(txs...)}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(txs))
	for i, tx := range txs {
		wg.Go(func() { errs[i] = q.ackTx(ctx, tx) })
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
	_, err := pipe.Exec(ctx) // nothing when there is nothing to delete
	return err
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

// ReasonUndecodable is the dead-letter reason of an entry that does not carry
// a valid order.
const ReasonUndecodable = "undecodable"

// DeadLetter writes each delivery to the dead-letter stream (the order's
// fields, then reason, stream, entry, deliveries), then finishes it. The
// record is written before the ack, so a crash in between repeats it rather
// than loses it: an operator may see a record twice, never zero times.
func (q *Queue) DeadLetter(ctx context.Context, ds []ports.Delivery, reason domain.FailureReason) error {
	if len(ds) == 0 {
		return nil
	}
	refs, err := refsOf(ds)
	if err != nil {
		return err
	}
	pipe := q.rdb.Pipeline()
	for i, d := range ds {
		values := append(redisschema.EncodeOrder(d.Order),
			"reason", string(reason), "stream", refs[i].stream, "entry", refs[i].id, "deliveries", d.Attempts)
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: q.opts.DeadLetter, Values: values})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("dead-letter %d order entries: %w", len(ds), err)
	}
	if err := q.finish(ctx, refs); err != nil {
		return fmt.Errorf("ack %d dead-lettered order entries: %w", len(ds), err)
	}
	return nil
}

// setAsidePoison copies an undecodable entry to the dead letter, then
// finishes it, and says so in the log: an operator must look at its producer.
func (q *Queue) setAsidePoison(ctx context.Context, s *stream, m redis.XMessage, attempts int, cause error) error {
	values := []any{"reason", ReasonUndecodable, "stream", s.key, "entry", m.ID, "deliveries", attempts, "error", cause.Error()}
	for _, f := range redisschema.OrderFields {
		if v, ok := m.Values[f]; ok {
			values = append(values, f, fmt.Sprint(v))
		}
	}
	if err := q.rdb.XAdd(ctx, &redis.XAddArgs{Stream: q.opts.DeadLetter, Values: values}).Err(); err != nil {
		return fmt.Errorf("dead-letter undecodable entry %s of %s: %w", m.ID, s.key, err)
	}
	ref := entryRef{s.key, m.ID}
	if err := q.finish(ctx, []entryRef{ref}); err != nil {
		return fmt.Errorf("ack undecodable entry %s of %s after dead-lettering it: %w", m.ID, s.key, err)
	}
	q.opts.Log.Error().Err(cause).Str("stream", s.key).Str("entry", m.ID).Int("deliveries", attempts).
		Str("dead_letter", q.opts.DeadLetter).
		Msg("undecodable order entry moved to the dead-letter stream and acknowledged: inspect it there (XRANGE), fix its producer, and reconcile the voucher")
	return nil
}

// renew keeps this process's hold on the entries it has read and not
// finished (buffered or with a worker), every renewEvery: without it, a
// batch retried through a database outage longer than MinIdle would be
// claimed by another consumer, or by this one's own claimer, and its delivery
// count would climb towards the worker's dead-letter limit while nothing is
// wrong with it. A process that dies stops renewing, which is what lets the
// others take over. It resets the idle time of every held entry still
// pending to this consumer (renew.lua) and lets go of those that are not.
func (q *Queue) renew(ctx context.Context) {
	refs := q.in.heldRefs()
	if len(refs) == 0 {
		return
	}
	chunks := slices.Concat(perStream(refs)...)
	calls := make([]scriptCall, len(chunks))
	for i, c := range chunks {
		args := append(make([]any, 0, 2+len(c.ids)), q.opts.Group, q.opts.Consumer)
		for _, id := range c.ids {
			args = append(args, id)
		}
		calls[i] = scriptCall{keys: []string{c.key}, args: args}
	}
	rctx, cancel := context.WithTimeout(ctx, q.renewEvery)
	defer cancel()
	cmds, err := q.runScripts(rctx, renewScript, calls)
	var lost []entryRef
	for i, c := range cmds {
		ids, _ := c.StringSlice() // none when the call failed
		for _, id := range ids {
			lost = append(lost, entryRef{chunks[i].key, id})
		}
	}
	q.in.release(lost)
	if err != nil && ctx.Err() == nil {
		q.opts.Log.Warn().Err(err).
			Msg("renewing the hold on in-flight order entries failed; if it lasts longer than MinIdle another consumer may take them over (harmless: writes are idempotent)")
	}
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

var (
	//go:embed ack.lua
	ackLua    string
	ackScript = redis.NewScript(ackLua)

	//go:embed renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)

	//go:embed gc.lua
	gcLua    string
	gcScript = redis.NewScript(gcLua)
)

// scriptChunk bounds the entry IDs one script call carries, so no call holds
// Redis for long or strains Lua's stack.
const scriptChunk = 500

// scriptCall is one run of a script: its KEYS and ARGV.
type scriptCall struct {
	keys []string
	args []any
}

// streamIDs is at most scriptChunk entry IDs of one stream, ascending.
type streamIDs struct {
	key string
	ids []string
}

// perStream groups entries by stream, and each stream's IDs in chunks of at
// most scriptChunk, in ascending order (ack.lua needs the smallest and
// largest; they mostly come sorted already).
func perStream(refs []entryRef) [][]streamIDs {
	byStream := map[string][]string{}
	for _, r := range refs {
		byStream[r.stream] = append(byStream[r.stream], r.id)
	}
	out := make([][]streamIDs, 0, len(byStream))
	for key, ids := range byStream {
		if !slices.IsSortedFunc(ids, cmpID) {
			slices.SortFunc(ids, cmpID)
		}
		var chunks []streamIDs
		for c := range slices.Chunk(ids, scriptChunk) {
			chunks = append(chunks, streamIDs{key: key, ids: c})
		}
		out = append(out, chunks)
	}
	return out
}

// runScripts runs one script for each call in one pipelined round trip, and
// returns the commands in call order with the first error. Calls on
// different slots are fine: a cluster pipeline splits by node.
func (q *Queue) runScripts(ctx context.Context, s *redis.Script, calls []scriptCall) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(calls))
	pipe := q.rdb.Pipeline()
	for i, c := range calls {
		cmds[i] = s.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	q.retryNoScript(ctx, s, cmds, calls)
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

// retryNoScript runs again the calls whose pipelined EVALSHA the server
// answered NOSCRIPT (just started, a failover, SCRIPT FLUSH), the way every
// Redis adapter answers it (redisx.Set.Retry: the scripts are loaded once,
// not sent whole with each call), and puts their new commands in cmds.
func (q *Queue) retryNoScript(ctx context.Context, s *redis.Script, cmds []*redis.Cmd, calls []scriptCall) {
	for i, c := range cmds {
		if redisx.IsNoScript(c.Err()) {
			cmds[i] = q.scripts.Retry(ctx, q.rdb, s, calls[i].keys, calls[i].args...)
		}
	}
}
