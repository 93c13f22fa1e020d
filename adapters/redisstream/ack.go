package redisstream

import (
	"context"
	"fmt"

	"github.com/hmdp-go/seckill/ports"
)

// Trimming: a stream must not grow without bound, and trimming must never
// remove an entry that is pending or not yet delivered. Entries are deleted in
// the same script that acknowledges them (ack.lua), atomically, so exactly
// what was just finished goes and nothing else. That keeps XLEN the number of
// unfinished entries, which Pending and the stream's garbage collection rely
// on. The script works out, inside Redis and so without a race, how far the
// stream may be trimmed: up to the largest ID it acknowledged, but never to
// the oldest entry still pending in the group. Acks mostly arrive in order,
// and then one XTRIM MINID deletes them; IDs acked out of order (several
// workers and instances, redeliveries), above an older pending entry, are
// deleted one by one (XDEL). XDEL alone was the first design, but it walks a
// radix-tree node (up to 100 entries) from its start for each ID, and was
// over half of Redis's time per order. Memory comes back a node at a time,
// once all its entries are deleted. The price: the stream is a work queue
// owned by this one group; a second group reading it would lose what this one
// already finished.

// Ack finishes deliveries whose outcome is committed: their entries are
// acknowledged and deleted (see trimming), grouped per stream, in one
// pipelined round trip. Acking again is harmless. It works after Close.
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

// finish acknowledges and deletes entries (ack.lua), per stream, and lets go
// of them.
func (q *Queue) finish(ctx context.Context, refs []entryRef) error {
	calls := perStreamCalls(refs, q.opts.Group)
	if _, err := runScripts(ctx, q.rdb, ackScript, calls); err != nil {
		return err
	}
	q.in.release(refs)
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
