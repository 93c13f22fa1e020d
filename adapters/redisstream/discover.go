package redisstream

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// discover registers live vouchers with a gate hash or a stream, so they are watched after the gate
// forgets them, and forgets streams no longer registered unless this process still keeps them.
func (q *Queue) discover(ctx context.Context, now time.Time) error {
	pipe := q.rdb.Pipeline()
	liveCmd := pipe.SMembers(ctx, q.live)
	regCmd := pipe.SMembers(ctx, q.registry)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("discover order streams: %w", err)
	}
	registered, fresh := parseTags(regCmd.Val()), parseTags(liveCmd.Val())
	maps.DeleteFunc(fresh, func(tag string, _ domain.VoucherID) bool {
		_, ok := registered[tag]
		return ok
	})
	pipe = q.rdb.Pipeline() // sends nothing when nothing is fresh
	exists := make(map[string]*redis.IntCmd, len(fresh))
	for tag := range fresh {
		k := redisschema.KeysForTag(q.opts.Prefix, tag)
		exists[tag] = pipe.Exists(ctx, k.Voucher, k.Orders) // one hash tag: one slot
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("discover order streams: %w", err)
	}
	var add []any
	for tag, c := range exists {
		if c.Val() > 0 {
			add = append(add, tag)
			registered[tag] = fresh[tag]
		}
	}
	if len(add) > 0 {
		if err := q.rdb.SAdd(ctx, q.registry, add...).Err(); err != nil {
			return fmt.Errorf("register order streams: %w", err)
		}
	}
	for tag, vid := range registered {
		q.watch(vid, tag)
	}
	for tag, s := range q.rd.streams {
		if _, ok := registered[tag]; !ok && !q.in.keeps(s) {
			delete(q.rd.streams, tag)
		}
	}
	q.rd.nextDiscover = now.Add(q.discoverEvery)
	if !now.Before(q.rd.nextCollect) {
		q.rd.nextCollect = now.Add(q.collectEvery)
		q.collect(ctx, registered)
	}
	return nil
}

// adopt takes on the streams Publish wrote and makes the group on every stream at ID 0, not $, so
// entries appended before any consumer looked are delivered too.
func (q *Queue) adopt(ctx context.Context) error {
	pub := q.in.takePublished()
	if len(pub) > 0 {
		ids := make([]any, 0, len(pub))
		for vid := range pub {
			ids = append(ids, int64(vid))
		}
		// Publish registered them unless that failed; once more is cheap.
		if err := q.rdb.SAdd(ctx, q.registry, ids...).Err(); err != nil {
			for vid := range pub {
				q.in.notePublished(vid) // taken on by the next Receive
			}
			return fmt.Errorf("register order streams: %w", err)
		}
		for vid := range pub {
			q.watch(vid, redisschema.VoucherTag(vid))
		}
	}
	now := time.Now()
	for _, s := range q.streamsIn() {
		if s.grouped() || s.resting(now) {
			continue
		}
		err := q.rdb.XGroupCreateMkStream(ctx, s.key, q.opts.Group, "0").Err()
		switch {
		case err == nil || redis.HasErrorPrefix(err, "BUSYGROUP"):
		case isReplyError(err):
			// A key of another type under the stream's name: discovery brings it back.
			q.opts.Log.Error().Err(err).Str("stream", s.key).
				Msg("cannot create the consumer group on an order stream; its orders are not fulfilled until the key is repaired")
			delete(q.rd.streams, s.tag)
			continue
		default:
			if err := q.streamError(s, fmt.Errorf("create consumer group %s on %s: %w", q.opts.Group, s.key, err)); err != nil {
				return err
			}
			continue
		}
		q.streamAnswered(s)
		s.groupMade()
	}
	return nil
}

// collect deletes and forgets the finished streams of vouchers whose gate hash is gone. The registry is
// in another slot: a second look registers again a stream a Publish wrote meanwhile.
func (q *Queue) collect(ctx context.Context, registered map[string]domain.VoucherID) {
	tags := slices.Sorted(maps.Keys(registered))
	calls := make([]scriptCall, len(tags))
	for i, tag := range tags {
		k := redisschema.KeysForTag(q.opts.Prefix, tag)
		calls[i] = scriptCall{keys: []string{k.Voucher, k.Orders}}
	}
	cmds, err := q.runScripts(ctx, gcScript, calls)
	var gone []string
	var members []any
	for i, c := range cmds {
		if n, err := c.Int(); err == nil && n == 1 {
			gone, members = append(gone, tags[i]), append(members, tags[i])
		}
	}
	if err != nil {
		q.opts.Log.Warn().Err(err).Msg("collecting finished order streams failed; trying again later")
	}
	if len(gone) == 0 {
		return
	}
	if err := q.rdb.SRem(ctx, q.registry, members...).Err(); err != nil {
		q.opts.Log.Warn().Err(err).Msg("unregistering finished order streams failed; trying again later")
		return
	}
	pipe := q.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(gone))
	for i, tag := range gone {
		exists[i] = pipe.Exists(ctx, redisschema.KeysForTag(q.opts.Prefix, tag).Orders)
	}
	_, err = pipe.Exec(ctx)
	var back []any
	for i, tag := range gone {
		// On an error it goes back too: a stream is forgotten only when seen gone.
		if err != nil || exists[i].Val() > 0 {
			back = append(back, tag)
			continue
		}
		delete(q.rd.streams, tag)
	}
	if len(back) > 0 {
		if err := q.rdb.SAdd(ctx, q.registry, back...).Err(); err != nil {
			q.opts.Log.Error().Err(err).Any("streams", back).
				Msg("re-registering order streams failed; they are read again once their vouchers are live or published to")
		}
	}
}

// parseTags maps live-set and registry members ("<id>", or "<id>.<salt>") to their vouchers.
func parseTags(members []string) map[string]domain.VoucherID {
	out := make(map[string]domain.VoucherID, len(members))
	for _, m := range members {
		if id, ok := redisschema.ParseTag(m); ok {
			out[m] = id
		}
	}
	return out
}
