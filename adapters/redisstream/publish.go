package redisstream

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Publish appends the order to its voucher's stream and registers the stream,
// so every consumer of the group finds it. There is no "full": a stream is
// bounded by Redis memory. As with any write over a network, an error does
// not prove the order was not enqueued; delivery is idempotent downstream.
func (q *Queue) Publish(ctx context.Context, o domain.VoucherOrder) error {
	q.closeMu.RLock()
	defer q.closeMu.RUnlock()
	if q.closed() {
		return ports.ErrQueueClosed
	}
	vid := o.VoucherID()
	key := q.keys(vid).Orders
	if err := q.rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: redisschema.EncodeOrder(o)}).Err(); err != nil {
		return fmt.Errorf("publish %s: %w", o, err)
	}
	// This Queue reads the stream from its next Receive on, registered or not.
	q.in.notePublished(vid)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	// Registered after the XADD, never before, so the garbage collection's
	// second look sees the stream (see collect). Two commands rather than one
	// pipeline: a cluster pipeline may run them on two nodes in either order.
	if err := q.rdb.SAdd(ctx, q.registry, int64(vid)).Err(); err != nil {
		return fmt.Errorf("publish %s: enqueued, but registering its stream failed: %w", o, err)
	}
	return nil
}
