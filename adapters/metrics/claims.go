package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// claimCtx is the context of one claim request: the parent, plus how many
// Redis round trips it made. Being the context itself (rather than a value
// stored in one) costs one allocation per claim, and the request a copy:
// paid only when a Redis hook counts (InstrumentRedis).
type claimCtx struct {
	context.Context
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

// ClaimStarted and ClaimAnswered make Metrics the router's claim observer
// (httpapi.ClaimObserver, declared by the router that calls it; infra hands
// Metrics over), so this package need not know the router.
//
// ClaimStarted starts counting a claim's Redis round trips, when a Redis
// hook is there to count them; otherwise the claim goes on with its own
// context, at no cost.
func (m *Metrics) ClaimStarted(ctx context.Context) context.Context {
	if !m.instrumented.Load() {
		return ctx
	}
	return &claimCtx{Context: ctx}
}

// ClaimAnswered counts the claim under its outcome (unknown codes count as
// OutcomeError) and observes its latency and, when counted, round trips.
func (m *Metrics) ClaimAnswered(ctx context.Context, code string, took time.Duration) {
	m.claims.inc(code, OutcomeError)
	m.claimSeconds.Observe(took.Seconds())
	if cc := claimFrom(ctx); cc != nil {
		m.claimRoundTrips.Observe(float64(cc.roundTrips.Load()))
	} else if m.instrumented.Load() {
		// Answered without ClaimStarted (the sold-out edge, before any
		// Redis work): no round trip.
		m.claimRoundTrips.Observe(0)
	}
}

// InstrumentRedis counts every command and pipeline rdb sends, and charges
// each to the claim whose context it runs in. Call it before serving.
func (m *Metrics) InstrumentRedis(rdb redis.UniversalClient) {
	m.instrumented.Store(true)
	rdb.AddHook(redisHook{m})
}

type redisHook struct{ m *Metrics }

func (redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		roundTrip(ctx, h.m.redisCommands)
		return next(ctx, cmd)
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		roundTrip(ctx, h.m.redisPipelines)
		return next(ctx, cmds)
	}
}

// roundTrip counts one round trip on n and charges it to ctx's claim.
func roundTrip(ctx context.Context, n prometheus.Counter) {
	n.Inc()
	if c := claimFrom(ctx); c != nil {
		c.roundTrips.Add(1)
	}
}
