package redisstream

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// backlogPage is how many entries one XRANGE of Orders reads: small enough
// not to hold Redis up for long, large enough that a sale's backlog takes a
// few round trips.
const backlogPage = 1000

// Orders lists the orders still in the voucher's stream, pending or not yet
// delivered (finished entries are deleted with their ack, see trimming), for
// reconcile to tell an order in flight from a lost one. It reads the stream
// in pages, at most max entries, without touching the group: a read here is
// not a delivery.
func (q *Queue) Orders(ctx context.Context, vid domain.VoucherID, max int) ([]domain.VoucherOrder, bool, error) {
	key := q.keys(vid).Orders
	var orders []domain.VoucherOrder
	start, read := "-", 0
	for read < max {
		n := min(backlogPage, max-read)
		msgs, err := q.rdb.XRangeN(ctx, key, start, "+", int64(n)).Result()
		if err != nil {
			return nil, false, fmt.Errorf("orders in the stream of voucher %d: %w", vid, err)
		}
		read += len(msgs)
		for _, m := range msgs {
			if o, err := redisschema.DecodeOrder(vid, m); err == nil {
				orders = append(orders, o)
			}
		}
		if len(msgs) < n {
			return orders, true, nil
		}
		if start, err = nextEntryID(msgs[len(msgs)-1].ID); err != nil {
			return nil, false, fmt.Errorf("orders in the stream of voucher %d: %w", vid, err)
		}
	}
	// max entries read: complete only if nothing follows them.
	more, err := q.rdb.XRangeN(ctx, key, start, "+", 1).Result()
	if err != nil {
		return nil, false, fmt.Errorf("orders in the stream of voucher %d: %w", vid, err)
	}
	return orders, len(more) == 0, nil
}

// nextEntryID is the smallest entry ID after id, the start of the next page
// (an exclusive "(id" start would need Redis 6.2 on every backend).
func nextEntryID(id string) (string, error) {
	msPart, seqPart, ok := strings.Cut(id, "-")
	ms, err1 := strconv.ParseUint(msPart, 10, 64)
	seq, err2 := strconv.ParseUint(seqPart, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return "", fmt.Errorf("entry ID %q is not ms-seq", id)
	}
	if seq == math.MaxUint64 {
		return strconv.FormatUint(ms+1, 10) + "-0", nil
	}
	return msPart + "-" + strconv.FormatUint(seq+1, 10), nil
}
