package infra

import (
	"context"
	"crypto/rand"
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
	"github.com/hmdp-go/seckill/adapters/jwtsession"
	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisroom"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/adapters/redisstream"
	"github.com/hmdp-go/seckill/adapters/worker"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// provideIDs' cleanup stops the issuer's leases before their clients close.
func provideIDs(rdb redis.UniversalClient, claims ClaimRedis, c Config) (*redisgate.IDs, func()) {
	ids := redisgate.NewIDs(rdb, redisgate.IDOptions{Block: c.IDBlock, Leases: claims.UniversalClient})
	return ids, func() { _ = ids.Close() }
}

// provideSessionStore bounds each session lookup by a shared deadline (a timer per slot, not per lookup).
func provideSessionStore(rdb redis.UniversalClient, claims ClaimRedis, c Config) *redissession.Store {
	var bounds application.SharedDeadlines
	return redissession.New(rdb, redissession.Options{TTL: c.TokenTTL, Lookups: claims.UniversalClient, Wait: c.RedisTimeout, Bound: bounds.Context})
}

// provideSessions puts the session cache in front of Redis; without CLIENT
// TRACKING a revoked token keeps working for up to TokenCacheTTL.
func provideSessions(rdb redis.UniversalClient, s *redissession.Store, c Config, log zerolog.Logger) (*redissession.Sessions, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t, err := redissession.NewSessions(ctx, rdb, s, redissession.CacheOptions{
		Size: c.TokenCacheSize, NoCache: c.TokenCacheTTL == 0, UntrackedTTL: c.TokenCacheTTL, Log: log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("session cache: %w", err)
	}
	if !t.Tracking() && c.TokenCacheTTL > 0 {
		ev := log.Warn()
		if embedded, _ := c.Embedded(); embedded { // expected there: no news
			ev = log.Info()
		}
		ev.Dur("bound", c.TokenCacheTTL).
			Msg("session cache without invalidation (Redis cannot track): a revoked token keeps working on this instance for up to the session cache TTL")
	}
	return t, func() { _ = t.Close() }, nil
}

// provideBearer verifies the identity provider's tokens when one is configured.
func provideBearer(c Config, log zerolog.Logger) (ports.BearerSessions, func(), error) {
	if !c.JWT.on() {
		return nil, func() {}, nil
	}
	v, err := jwtsession.New(jwtsession.Options{
		JWKSURL: c.JWT.JWKSURL, KeyFile: c.JWT.KeyFile, Issuer: c.JWT.Issuer, Audience: c.JWT.Audience,
		Algs: c.JWT.algs(), UserClaim: c.JWT.UserClaim, RolesClaim: c.JWT.RolesClaim, AdminRole: c.JWT.AdminRole,
		CacheSize: c.TokenCacheSize, Log: log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sessions from the identity provider: %w", err)
	}
	if unset := c.JWT.unchecked(); len(unset) > 0 {
		log.Warn().Strs("unset", unset).Msg("the identity provider's tokens are accepted whatever their issuer or audience where unset: " +
			"a token the provider issued for another application passes too; set SECKILL_JWT_ISSUER and SECKILL_JWT_AUDIENCE")
	}
	log.Info().Str("issuer", c.JWT.Issuer).Str("audience", c.JWT.Audience).Strs("algs", c.JWT.algs()).
		Str("admin_role", c.JWT.AdminRole).Msg("the identity provider's tokens are accepted (Authorization: Bearer <JWT>)")
	return v, v.Close, nil
}

// provideTokens mounts the dev token endpoint only when it is enabled.
func provideTokens(s *redissession.Store, c Config) ports.TokenIssuer {
	if !c.DevEndpoints {
		return nil
	}
	return s
}

func provideWorker(q ports.OrderQueue, f *application.FulfillOrders, log zerolog.Logger, c Config, o *Observability) *worker.Worker {
	return worker.New(q, f, log.With().Str("component", "worker").Logger(),
		worker.Options{BatchSize: c.BatchSize, MaxDeliveries: c.MaxDeliveries, Retried: o.workerRetried})
}

// provideHandler completes the router's dependencies with the settings, and logs what they leave open.
func provideHandler(d httpapi.Deps, c Config, rdb redis.UniversalClient, log zerolog.Logger) http.Handler {
	if d.Tokens != nil {
		log.Warn().Msg("dev endpoint POST /dev/tokens is enabled: anyone can mint a login token")
	}
	d.Location, d.Admins, d.TrustedProxies = c.Location(), c.Admins(), c.Proxies()
	if len(d.Admins) == 0 && c.JWT.AdminRole == "" {
		log.Warn().Msg("no admin user: voucher creation and every admin endpoint answer 403 to everyone; " +
			"set SECKILL_ADMIN_USERS to comma-separated user ids (e.g. SECKILL_ADMIN_USERS=1) to enable them")
	} else {
		log.Info().Interface("admin_users", d.Admins).Str("admin_role", c.JWT.AdminRole).Str("live_sale_page", "/admin/sales").Msg("admin endpoints enabled")
	}
	proxies := make([]string, len(d.TrustedProxies))
	for i, p := range d.TrustedProxies {
		proxies[i] = p.String()
	}
	if c.PaymentSecret == "" {
		log.Info().Msg("payments off: POST /payments/notify is not mounted; set SECKILL_PAYMENT_SECRET to enable it")
	}
	log.Info().Int("per_user", c.RateUser).Int("per_ip", c.RateIP).Str("window", c.RateWindow.String()).
		Strs("trusted_proxies", proxies).Msg("rate limits on claim and order status (0 = off)")
	d.Limits = httpapi.Limits{PerUser: c.RateUser, PerIP: c.RateIP, Window: c.RateWindow}
	d.Split = splitRule(rdb, c, log)
	d.PaymentSecret = []byte(c.PaymentSecret)
	return httpapi.NewRouter(d)
}

// splitRule is Tuning.BucketsAbove's rule, into Tuning.Buckets or else one bucket per cluster master.
func splitRule(rdb redis.UniversalClient, c Config, log zerolog.Logger) httpapi.SplitRule {
	if c.BucketsAbove <= 0 {
		return httpapi.SplitRule{}
	}
	k := c.Buckets
	if k == 0 {
		k = 1
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if shards, err := cc.ClusterShards(ctx).Result(); err != nil {
				log.Warn().Err(err).Msg("cannot count the cluster's masters: Tuning.BucketsAbove splits nothing; set Tuning.Buckets")
			} else {
				k = min(len(shards), domain.MaxBuckets)
			}
		}
	}
	log.Info().Int("above_stock", c.BucketsAbove).Int("buckets", k).Msg("vouchers created above this stock without \"buckets\" are split")
	return httpapi.SplitRule{Above: c.BucketsAbove, Into: k}
}

// provideGate is the gate of every voucher; split vouchers need the stream queue.
func provideGate(rdb redis.UniversalClient, claims ClaimRedis, c Config, vouchers *mysqlstore.VoucherRepo, orders *mysqlstore.OrderRepo) *redisgate.Gate {
	return redisgate.New(rdb, redisgate.Options{Prefix: c.KeyPrefix, Retention: c.KeyRetention, Claims: claims.UniversalClient,
		WaitReplicas: c.RedisWaitReplicas, WaitTimeout: c.RedisWaitTimeout, ReclaimAfterCancel: c.ReclaimAfterCancel,
		Unsplit: c.Queue != QueueStream, Vouchers: vouchers, Orders: orders, Unreturned: orders.Unreturned})
}

func provideSoldOutMarks(c Config) *application.SoldOutMarks {
	return application.NewSoldOutMarks(c.SoldOutWindow, nil)
}

// provideStockGate is the gate every use case sees: RoomGate (opens a sale's
// room before its gate) over SoldOutGate (clears the marks when stock may come back).
func provideStockGate(gate *redisgate.Gate, marks *application.SoldOutMarks, dir *application.RoomDirectory) *application.RoomGate {
	return application.NewRoomGate(marks.Gate(gate), dir)
}

// provideRestoreGate also applies the sales' controls again (a control whose gate write failed).
func provideRestoreGate(vouchers ports.VoucherRepository, orders ports.OrderRepository, gate ports.StockGate,
	probe ports.GateProbe, clock ports.Clock, controls ports.GateControls) *application.RestoreGate {
	return application.NewRestoreGate(vouchers, orders, gate, probe, clock).WithControls(controls)
}

// expiryEvery: well inside the promised 5 s.
const expiryEvery = time.Second

// expiryBatch bounds one expiry transaction; a full batch is followed by another at once.
const expiryBatch = 500

func provideMySQLOrderRepo(db *bun.DB, c Config) *mysqlstore.OrderRepo {
	return mysqlstore.NewOrderRepo(db).WithPayWindow(c.PayWindow).WithReclaimAfterCancel(c.ReclaimAfterCancel)
}

func provideExpireOrders(life ports.OrderLifecycle, gate ports.StockGate, clock ports.Clock) *application.ExpireOrders {
	return application.NewExpireOrders(life, gate, clock, expiryBatch)
}

func providePayOrder(orders ports.OrderRepository, vouchers ports.VoucherRepository, life ports.OrderLifecycle, index ports.OrderIndex, clock ports.Clock, c Config) *application.PayOrder {
	return application.NewPayOrder(orders, vouchers, life, index, clock, c.PayWindow)
}

func provideRoomStore(rdb redis.UniversalClient, c Config) *redisroom.Rooms {
	return redisroom.New(rdb, c.KeyPrefix)
}

// provideRoomSigner keys the rooms' tickets and passes with SECKILL_ROOM_SECRET, or else a key kept in Redis.
func provideRoomSigner(rdb redis.UniversalClient, c Config, log zerolog.Logger) (*application.RoomSigner, error) {
	if c.RoomSecret != "" {
		return application.NewRoomSigner([]byte(c.RoomSecret)), nil
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("room key: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	key, err := redisroom.SharedKey(ctx, rdb, c.KeyPrefix, fresh)
	if err != nil {
		return nil, err
	}
	log.Info().Msg("waiting rooms sign with the key kept in Redis; set SECKILL_ROOM_SECRET so a Redis that loses its data does not void the tickets and passes out")
	return application.NewRoomSigner(key), nil
}

// provideClaimSeckill is the claim with all its steps: room pass, sold-out marks, admission, counts.
func provideClaimSeckill(ids ports.OrderIDs, admission ports.Admission, rooms *application.WaitingRoom,
	marks *application.SoldOutMarks, counter *metrics.ClaimCounter,
) *application.ClaimSeckill {
	return application.NewClaimSeckill(ids, admission).WithRooms(rooms).WithSoldOutMarks(marks).WithRecorder(counter)
}

// queueDriver is what the queue driver of SECKILL_QUEUE gives the graph.
type queueDriver struct {
	Admission ports.Admission
	Queue     ports.OrderQueue // observed when metrics are on
	Monitor   ports.QueueMonitor
}

// provideChannelQueue is the channel driver: its admission reserves through the marked gate, so a
// rollback clears the mark at once.
func provideChannelQueue(c Config, stock ports.StockGate, o *Observability) queueDriver {
	q := chanqueue.New(c.QueueCapacity, c.BatchLinger)
	d := queueDriver{Admission: chanqueue.NewAdmission(stock, q), Queue: q, Monitor: q}
	if o.Metrics != nil {
		o.Metrics.ChannelQueue(q.Len)
		d.Queue = o.Metrics.OrderQueue(q)
	}
	return d
}

// provideStreamDriver is the Redis Stream driver: its claim script also XADDs the order.
func provideStreamDriver(c Config, rdb redis.UniversalClient, gate *redisgate.Gate, o *Observability, log zerolog.Logger,
) (queueDriver, func(), error) {
	q, cleanup, err := provideStreamQueue(rdb, c, log)
	if err != nil {
		return queueDriver{}, nil, err
	}
	d := queueDriver{Admission: redisstream.NewAdmission(gate, q), Queue: q, Monitor: q}
	if o.Metrics != nil {
		o.Metrics.Registry().MustRegister(metrics.NewStreamCollector(rdb, metrics.StreamOptions{Prefix: c.KeyPrefix, Group: c.StreamGroup}))
		d.Queue = o.Metrics.OrderQueue(q)
	}
	return d, cleanup, nil
}

// provideStreamQueue first takes the consumer lease, refusing a second live instance under the
// same SECKILL_CONSUMER (one pending list). The cleanup releases it: a graceful restart does not wait.
func provideStreamQueue(rdb redis.UniversalClient, c Config, log zerolog.Logger) (*redisstream.Queue, func(), error) {
	// A killed instance's name stays taken this long, well before others would take its entries over.
	ttl := min(max(c.StreamMinIdle/3, time.Second), 10*time.Second)
	key := c.KeyPrefix + "consumer:" + c.Consumer
	ctx, cancel := context.WithTimeout(context.Background(), 3*ttl)
	defer cancel()
	lease, err := redisstream.AcquireLease(ctx, rdb, key, redisstream.LeaseOptions{
		TTL: ttl, Wait: ttl + ttl/2, Log: log.With().Str("component", "consumer-lease").Logger(),
	})
	if errors.Is(err, redisstream.ErrLeaseHeld) {
		return nil, nil, fmt.Errorf("SECKILL_CONSUMER=%q is in use by another running instance (%w); "+
			"give each instance its own stable name", c.Consumer, err)
	}
	if err != nil {
		return nil, nil, err
	}
	release := func() {
		if err := lease.Release(); err != nil {
			log.Warn().Err(err).Msg("consumer name not released; a restart under it waits for the lease to expire")
		}
	}
	q, err := redisstream.New(rdb, redisstream.Options{Prefix: c.KeyPrefix, Group: c.StreamGroup, Consumer: c.Consumer,
		Block: c.StreamBlock, MinIdle: c.StreamMinIdle, Linger: c.BatchLinger, Log: log.With().Str("component", "stream").Logger()})
	if err != nil {
		release()
		return nil, nil, err
	}
	return q, func() {
		_ = q.Close()
		release()
	}, nil
}

// The two queue drivers, one injector each (wire.go), as go-cloud's guestbook picks one per environment.
var (
	channelSet = wire.NewSet(commonSet, provideChannelQueue)
	streamSet  = wire.NewSet(commonSet, provideStreamDriver)
)

var commonSet = wire.NewSet(
	NewRedis,
	NewClaimRedis,
	provideTracing,
	provideDB,
	wire.Struct(new(ports.SystemClock)),
	wire.Bind(new(ports.Clock), new(ports.SystemClock)),
	provideReady,
	provideIDs,
	wire.Bind(new(ports.OrderIDs), new(*redisgate.IDs)),
	provideSessionStore,
	provideSessions,
	wire.Bind(new(ports.Sessions), new(*redissession.Sessions)),
	provideBearer,
	provideTokens,
	mysqlstore.NewVoucherRepo,
	wire.Bind(new(ports.VoucherRepository), new(*mysqlstore.VoucherRepo)),
	provideMySQLOrderRepo,
	provideExpireOrders,
	application.NewCancelOrder,
	providePayOrder,
	provideObservability,
	wire.FieldsOf(new(*Observability), "Orders", "Lifecycle", "ClaimObserver"),
	wire.FieldsOf(new(queueDriver), "Admission", "Queue", "Monitor"),
	provideGate,
	wire.Bind(new(ports.GateProbe), new(*redisgate.Gate)),
	wire.Bind(new(ports.GateAudit), new(*redisgate.Gate)),
	wire.Bind(new(ports.GateControls), new(*redisgate.Gate)),
	wire.Bind(new(ports.OrderIndex), new(*redisgate.Gate)),
	wire.Bind(new(ports.SaleControls), new(*mysqlstore.VoucherRepo)),
	wire.Bind(new(ports.OrderLedger), new(*mysqlstore.OrderRepo)),
	wire.Bind(new(ports.SaleOrders), new(*mysqlstore.OrderRepo)),
	mysqlstore.NewAuditRepo,
	wire.Bind(new(ports.AuditLog), new(*mysqlstore.AuditRepo)),
	provideSoldOutMarks,
	provideStockGate,
	wire.Bind(new(ports.StockGate), new(*application.RoomGate)),
	provideRoomStore,
	wire.Bind(new(ports.RoomStore), new(*redisroom.Rooms)),
	application.NewRoomDirectory,
	provideRoomSigner,
	application.NewWaitingRoom,
	metrics.NewClaimCounter,
	wire.Bind(new(ports.ClaimCounts), new(*metrics.ClaimCounter)),
	application.NewAddSeckillVoucher,
	application.NewListShopVouchers,
	provideClaimSeckill,
	application.NewFulfillOrders,
	application.NewGetOrder,
	provideRestoreGate,
	application.NewSaleDashboard,
	application.NewListSaleOrders,
	application.NewReadAuditLog,
	application.NewControlSale,
	provideWorker,
	// The router's use cases and sessions; provideHandler sets the rest.
	wire.Struct(new(httpapi.Deps), "AddVoucher", "ListVouchers", "Claim", "GetOrder", "Sessions", "Bearer", "Tokens",
		"Ready", "Log", "Sales", "ClaimObserver", "Cancel", "Pay", "Orders", "Audit", "Controls", "Rooms"),
	provideHandler,
	wire.Struct(new(App), "Config", "Log", "Handler", "Queue", "Restore", "Gate", "Tokens", "Sessions", "DB", "Redis",
		"Observability", "Expire", "Worker", "Claims"),
)
