package infra

import (
	"github.com/google/wire"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisstream"
	"github.com/hmdp-go/seckill/adapters/soldout"
	"github.com/hmdp-go/seckill/ports"
)

// provideStreamAdmission: the claim script also XADDs the order, so
// reservation and message are one atomic step.
func provideStreamAdmission(m *soldout.Marks, g *redisgate.Gate, q *redisstream.Queue) *soldout.Admission {
	return m.Admission(redisstream.NewAdmission(g, q))
}

// provideStreamQueue's cleanup stops its lease renewal if the service never
// ran (App.Shutdown closes it otherwise; Close is idempotent).
func provideStreamQueue(rdb redis.UniversalClient, c Config, log zerolog.Logger) (*redisstream.Queue, func(), error) {
	q, err := redisstream.New(rdb, redisstream.Options{
		Prefix:   c.KeyPrefix,
		Group:    c.StreamGroup,
		Consumer: c.Consumer,
		Block:    c.StreamBlock,
		MinIdle:  c.StreamMinIdle,
		Log:      log.With().Str("component", "stream").Logger(),
	})
	if err != nil {
		return nil, nil, err
	}
	return q, func() { _ = q.Close() }, nil
}

// streamSet: the Redis Stream queue, shared by every instance as one group.
var streamSet = wire.NewSet(
	provideStreamAdmission,
	wire.Bind(new(ports.Admission), new(*soldout.Admission)),
	provideStreamQueue,
	provideObservedStreamQueue,
)
