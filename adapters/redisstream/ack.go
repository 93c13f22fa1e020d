package redisstream

import (
	"context"
	"fmt"

	"github.com/hmdp-go/seckill/ports"
)

// Trimming: a stream must not grow without bound, and trimming must never
// remove an entry that is pending or not yet delivered. Entries are deleted
// (XDEL) in the same script that acknowledges them (ack.lua), instead of an
// XTRIM MINID below the oldest unfinished entry: acks arrive out of order
// (several workers and instances, redeliveries), so MINID would need the
// oldest pending ID and the group's read position, read and acted on without
// a race; XDEL removes exactly what was just finished and nothing else. It
// also makes XLEN the number of unfinished entries, which Pending and the
// stream's garbage collection rely on. Memory comes back a radix-tree node
// (up to 100 entries) at a time, once all its entries are deleted, which
// suits entries finished roughly in the order they came. The price: the
// stream is a work queue owned by this one group; a second group reading it
// would lose what this one already finished.

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
