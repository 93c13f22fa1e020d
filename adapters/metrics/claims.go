package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/httpapi"
)

var _ httpapi.ClaimObserver = (*Metrics)(nil)

// claimCtx is the context of one claim request: the parent, plus when it
// started and how many Redis round trips it made. Being the context itself
// (rather than a value stored in one) costs one allocation per claim.
type claimCtx struct {
	context.Context
	start      time.Time
	roundTrips atomic.Int32
}

type claimKey struct{}

func (c *claimCtx) Value(key any) any {
	if key == (claimKey{}) {
		return c
	}
	return c.Context.Value(key)
}

func claimFrom(ctx context.Context) *claimCtx {
	c, _ := ctx.Value(claimKey{}).(*claimCtx)
	return c
}

// ClaimStarted starts timing a claim and counting its Redis round trips.
func (m *Metrics) ClaimStarted(ctx context.Context) context.Context {
	return &claimCtx{Context: ctx, start: time.Now()}
}

// ClaimAnswered counts the claim under its outcome (unknown codes count as
// OutcomeError) and observes its latency and round trips.
func (m *Metrics) ClaimAnswered(ctx context.Context, code string) {
	c, ok := m.claims[code]
	if !ok {
		c = m.claims[OutcomeError]
	}
	c.Inc()
	if cc := claimFrom(ctx); cc != nil {
		m.claimSeconds.Observe(time.Since(cc.start).Seconds())
		m.claimRoundTrips.Observe(float64(cc.roundTrips.Load()))
	}
}

// InstrumentRedis counts every command and pipeline rdb sends, and charges
// each to the claim whose context it runs in. Call it before serving.
func (m *Metrics) InstrumentRedis(rdb redis.UniversalClient) {
	rdb.AddHook(redisHook{m})
}

type redisHook struct{ m *Metrics }

var _ redis.Hook = redisHook{}

func (redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.m.redisCommands.Inc()
		if c := claimFrom(ctx); c != nil {
			c.roundTrips.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.m.redisPipelines.Inc()
		if c := claimFrom(ctx); c != nil {
			c.roundTrips.Add(1)
		}
		return next(ctx, cmds)
	}
}
