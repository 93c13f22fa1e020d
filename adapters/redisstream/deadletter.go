package redisstream

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

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

// DeadLetters is how many records the dead-letter stream keeps.
func (q *Queue) DeadLetters(ctx context.Context) (int64, error) {
	n, err := q.rdb.XLen(ctx, q.opts.DeadLetter).Result()
	if err != nil {
		return 0, fmt.Errorf("dead-letter records: %w", err)
	}
	return n, nil
}
