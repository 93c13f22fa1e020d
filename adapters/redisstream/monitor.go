package redisstream

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var _ ports.QueueMonitor = (*Queue)(nil)

// Overview counts the dead letters; the stream's backlog is per voucher.
func (q *Queue) Overview(ctx context.Context) (ports.QueueOverview, error) {
	n, err := q.DeadLetters(ctx)
	if err != nil {
		return ports.QueueOverview{}, err
	}
	return ports.QueueOverview{Kind: "stream", Length: -1, DeadLetters: n}, nil
}

// Backlog reads the voucher's stream in one round trip of three commands:
// XLEN (finished entries are deleted with their ack, so this is what is
// unfinished), the XPENDING summary of the group, and the oldest entry,
// whose ID holds the time it was added: its age is the fulfilment lag.
func (q *Queue) Backlog(ctx context.Context, vid domain.VoucherID) (ports.Backlog, error) {
	key := q.keys(vid).Orders
	pipe := q.rdb.Pipeline()
	xlen := pipe.XLen(ctx, key)
	pending := pipe.XPending(ctx, key, q.opts.Group)
	oldest := pipe.XRangeN(ctx, key, "-", "+", 1)
	_, _ = pipe.Exec(ctx) // each command's error is read below
	b := ports.Backlog{Known: true}
	var err error
	if b.Length, err = xlen.Result(); err != nil {
		return b, fmt.Errorf("backlog of voucher %d: %w", vid, err)
	}
	switch p, err := pending.Result(); {
	case isNoGroup(err) || (err != nil && strings.Contains(err.Error(), "no such key")):
		// No group yet: nothing was delivered.
	case err != nil:
		return b, fmt.Errorf("pending entries of voucher %d: %w", vid, err)
	default:
		b.Pending = p.Count
	}
	msgs, err := oldest.Result()
	if err != nil && err != redis.Nil {
		return b, fmt.Errorf("oldest entry of voucher %d: %w", vid, err)
	}
	if len(msgs) > 0 {
		if ms, _ := splitID(msgs[0].ID); ms > 0 {
			b.Lag = max(time.Since(time.UnixMilli(int64(ms))), 0)
		}
	}
	return b, nil
}
