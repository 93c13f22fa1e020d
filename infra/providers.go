package infra

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/wire"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/adapters/soldout"
	"github.com/hmdp-go/seckill/adapters/worker"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/ports"
)

// SystemClock is the wall clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }

// ReadyCheck reports whether the backends answer.
type ReadyCheck func(context.Context) error

func provideReady(rdb redis.UniversalClient, db *bun.DB) ReadyCheck { return ready(rdb, db) }

func provideIDs(rdb redis.UniversalClient, claims ClaimRedis, c Config) *redisgate.IDs {
	return redisgate.NewIDs(rdb, redisgate.IDOptions{Block: c.IDBlock, Leases: claims.UniversalClient})
}

func provideSessionStore(rdb redis.UniversalClient, claims ClaimRedis, c Config) *redissession.Store {
	// Without a cache every lookup slides the session's expiry itself.
	return redissession.New(rdb, redissession.Options{TTL: c.TokenTTL, Lookups: claims.UniversalClient, Refresh: c.TokenCacheTTL == 0})
}

// provideSessions puts the tracked token cache in front of Redis: no Redis
// on a cached token, and a deleted or expired token refused on every
// instance as soon as Redis reports it (redissession.Tracked). With
// SECKILL_TOKEN_CACHE_TTL=0 every request asks Redis (and slides the
// session's expiry, as the original does). On a Redis without CLIENT
// TRACKING (the embedded miniredis) the cache falls back to the old bound:
// a revoked token keeps working here for up to SECKILL_TOKEN_CACHE_TTL.
func provideSessions(rdb redis.UniversalClient, s *redissession.Store, c Config, log zerolog.Logger) (ports.Sessions, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.LoadScripts(ctx); err != nil {
		return nil, nil, fmt.Errorf("load the session lookup script: %w", err)
	}
	if c.TokenCacheTTL == 0 {
		return s, func() {}, nil
	}
	t, err := redissession.NewTracked(ctx, rdb, s, redissession.TrackedOptions{Size: c.TokenCacheSize, Period: c.TokenCacheTTL})
	if errors.Is(err, redissession.ErrTrackingUnsupported) {
		log.Warn().Err(err).Dur("bound", c.TokenCacheTTL).
			Msg("session cache without invalidation: a revoked token keeps working on this instance for up to SECKILL_TOKEN_CACHE_TTL")
		return redissession.NewCached(s, redissession.CacheOptions{Size: c.TokenCacheSize, TTL: c.TokenCacheTTL}), func() {}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("session cache: %w", err)
	}
	return t, func() { _ = t.Close() }, nil
}

// provideTokens mounts the dev token endpoint only when it is enabled.
func provideTokens(s *redissession.Store, c Config) ports.TokenIssuer {
	if !c.DevEndpoints {
		return nil
	}
	return s
}

func provideWorker(q ports.OrderQueue, f *application.FulfillOrders, log zerolog.Logger, c Config) *worker.Worker {
	return worker.New(q, f, log.With().Str("component", "worker").Logger(),
		worker.Options{BatchSize: c.BatchSize, MaxDeliveries: c.MaxDeliveries})
}

func provideHandler(
	add *application.AddSeckillVoucher, list *application.ListShopVouchers,
	claim *application.ClaimSeckill, get *application.GetOrder,
	sessions ports.Sessions, tokens ports.TokenIssuer, ready ReadyCheck,
	marks *soldout.Marks, log zerolog.Logger, c Config,
) http.Handler {
	if tokens != nil {
		log.Warn().Msg("dev endpoint POST /dev/tokens is enabled: anyone can mint a login token")
	}
	if len(c.Admins()) == 0 {
		log.Warn().Msg("no admin user: voucher creation and every admin endpoint answer 403 to everyone; " +
			"set SECKILL_ADMIN_USERS to comma-separated user ids (e.g. SECKILL_ADMIN_USERS=1) to enable them")
	} else {
		log.Info().Interface("admin_users", c.Admins()).Msg("admin endpoints enabled")
	}
	proxies := make([]string, len(c.Proxies()))
	for i, p := range c.Proxies() {
		proxies[i] = p.String()
	}
	log.Info().Int("per_user", c.RateUser).Int("per_ip", c.RateIP).Str("window", c.RateWindow.String()).
		Strs("trusted_proxies", proxies).Msg("rate limits on claim and order status (0 = off)")
	return httpapi.NewRouter(httpapi.Deps{
		AddVoucher: add, ListVouchers: list, Claim: claim, GetOrder: get,
		Sessions: sessions, Tokens: tokens, Ready: ready, Log: log, Location: c.Location(),
		Admins:         c.Admins(),
		Limits:         httpapi.Limits{PerUser: c.RateUser, PerIP: c.RateIP, Window: c.RateWindow},
		TrustedProxies: c.Proxies(),
		SoldOut:        marks,
	})
}

func provideGate(rdb redis.UniversalClient, claims ClaimRedis, c Config) *redisgate.Gate {
	return redisgate.New(rdb, redisgate.Options{Prefix: c.KeyPrefix, Retention: c.KeyRetention, Claims: claims.UniversalClient})
}

// provideSoldOutMarks are this instance's local sold-out marks: its
// Admission decorator answers a stampede on a sold-out voucher without Redis,
// and its Gate decorator forgets a mark whenever stock may come back.
func provideSoldOutMarks(c Config) *soldout.Marks {
	return soldout.New(soldout.Options{Window: c.SoldOutWindow})
}

func provideSoldOutGate(m *soldout.Marks, g *redisgate.Gate) *soldout.Gate { return m.Gate(g) }

func provideChannelQueue(c Config) *chanqueue.Queue {
	return chanqueue.New(c.QueueCapacity, c.BatchLinger)
}

// provideChannelAdmission reserves through the marked gate, so a rollback's
// Release clears the voucher's mark at once.
func provideChannelAdmission(m *soldout.Marks, g *soldout.Gate, q *chanqueue.Queue) *soldout.Admission {
	return m.Admission(chanqueue.NewAdmission(g, q))
}

// commonSet is everything but the queue driver.
var commonSet = wire.NewSet(
	NewRedis,
	NewClaimRedis,
	NewDB,
	wire.Struct(new(SystemClock)),
	wire.Bind(new(ports.Clock), new(SystemClock)),
	provideReady,
	provideIDs,
	wire.Bind(new(ports.OrderIDs), new(*redisgate.IDs)),
	provideSessionStore,
	provideSessions,
	provideTokens,
	mysqlstore.NewVoucherRepo,
	wire.Bind(new(ports.VoucherRepository), new(*mysqlstore.VoucherRepo)),
	mysqlstore.NewOrderRepo,
	wire.Bind(new(ports.OrderRepository), new(*mysqlstore.OrderRepo)),
	provideGate,
	wire.Bind(new(ports.GateProbe), new(*redisgate.Gate)),
	provideSoldOutMarks,
	provideSoldOutGate,
	wire.Bind(new(ports.StockGate), new(*soldout.Gate)),
	application.NewAddSeckillVoucher,
	application.NewListShopVouchers,
	application.NewClaimSeckill,
	application.NewFulfillOrders,
	application.NewGetOrder,
	application.NewRestoreGate,
	provideWorker,
	provideHandler,
	wire.Struct(new(App), "Config", "Log", "Handler", "Queue", "Worker", "Restore", "Gate", "Tokens", "DB", "Redis"),
)

// channelSet: the in-process bounded channel, fed by the gate plus the channel.
var channelSet = wire.NewSet(
	provideChannelAdmission,
	wire.Bind(new(ports.Admission), new(*soldout.Admission)),
	provideChannelQueue,
	wire.Bind(new(ports.OrderQueue), new(*chanqueue.Queue)),
)
