package infra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisroom"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/adapters/worker"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/ports"
)

// App is one wired service: what `seckill serve` runs and in-process tests and the bench start.
type App struct {
	Config        Config
	Log           zerolog.Logger
	Handler       http.Handler
	Queue         ports.OrderQueue
	Restore       *application.RestoreGate
	Gate          *redisgate.Gate
	Tokens        ports.TokenIssuer
	Sessions      *redissession.Sessions
	DB            *bun.DB
	Redis         redis.UniversalClient
	Observability *Observability
	Expire        *application.ExpireOrders
	Worker        *worker.Worker
	Claims        *metrics.ClaimCounter

	srv      *http.Server
	addr     net.Addr
	bg       *background
	serveErr chan error
}

// Build wires the service through the injector of SECKILL_QUEUE's driver.
func Build(c Config, log zerolog.Logger) (*App, func(), error) {
	switch c.Queue {
	case QueueChannel:
		return InitChannelApp(c, log)
	case QueueStream:
		return InitStreamApp(c, log)
	}
	return nil, nil, fmt.Errorf("SECKILL_QUEUE=%q is not available", c.Queue)
}

// Start readies the backends, starts the background services, then serves HTTP; it returns once bound.
func (a *App) Start(ctx context.Context) error {
	deployment, err := a.prepare(ctx)
	if err != nil {
		return err
	}
	a.bg = startServices(ctx, a.Log, a.services())
	maxConns, err := a.serve()
	if err != nil {
		a.bg.stop()
		return err
	}
	a.logListening(deployment, maxConns)
	return nil
}

// prepare does everything a claim or a worker relies on, and answers the deployment's name.
func (a *App) prepare(ctx context.Context) (string, error) {
	if a.Config.Migrate {
		applied, err := mysqlstore.Migrate(ctx, a.DB)
		if err != nil {
			return "", fmt.Errorf("migrate: %w", err)
		}
		if len(applied) > 0 {
			a.Log.Info().Strs("migrations", applied).Msg("database migrated")
		}
	}
	// Before any Redis write: another deployment's prefix must not get our gates.
	deployment, err := BindDeployment(ctx, a.DB, a.Redis, a.Config)
	if err != nil {
		return "", err
	}
	// Before any claim: a claim that meets NOSCRIPT waits for a reload.
	if err := a.Gate.LoadScripts(ctx); err != nil {
		return "", err
	}
	if err := redisroom.LoadScripts(ctx, a.Redis); err != nil {
		return "", err
	}
	rep, err := a.Restore.Repair(ctx)
	logHealed(a.Log, rep.Healed)
	if err != nil {
		return "", fmt.Errorf("restore gate: %w", err)
	}
	if rep.Restored > 0 {
		a.Log.Info().Int("vouchers", rep.Restored).Msg("gate restored from the database")
	}
	if n, err := a.Gate.PruneLive(ctx); err != nil {
		a.Log.Warn().Err(err).Msg("pruning ended sales from the live set failed")
	} else if n > 0 {
		a.Log.Info().Int("vouchers", n).Msg("ended sales pruned from the live set")
	}
	return deployment, nil
}

// serve serves the API and the metrics, and answers the API's connection cap.
func (a *App) serve() (int, error) {
	l, err := net.Listen("tcp", a.Config.HTTPAddr)
	if err != nil {
		return 0, listenError("the API", "SECKILL_HTTP_ADDR", a.Config.HTTPAddr, err)
	}
	a.addr = l.Addr()
	maxConns := a.Config.maxConns(fileLimit())
	if a.Config.HTTPMaxConns == 0 && maxConns < fewConns {
		a.Log.Warn().Uint64("file_limit", fileLimit()).Int("max_conns", maxConns).
			Msg("the open-file limit cuts the API's connection cap: raise it (ulimit -n, or the container runtime's nofile limit) or set SECKILL_HTTP_MAX_CONNS")
	}
	a.srv, l = newAPIServer(a.Observability.tracing.wrap(a.Handler), l, maxConns)
	a.serveErr = make(chan error, 1)
	go func() { a.serveErr <- a.srv.Serve(l) }()
	if err := a.Observability.start(a.Config); err != nil {
		_ = a.srv.Close()
		<-a.serveErr
		return 0, err
	}
	return maxConns, nil
}

func (a *App) logListening(deployment string, maxConns int) {
	redisEmbedded, dbEmbedded := a.Config.Embedded()
	metricsURL := "off"
	if addr := a.Observability.MetricsAddr(); addr != "" {
		metricsURL = "http://" + addr + "/metrics"
	}
	ev := a.Log.Info().Str("addr", "http://"+a.addr.String()).Str("queue", a.Config.Queue).
		Bool("embedded_redis", redisEmbedded).Bool("embedded_db", dbEmbedded).Str("db", a.Config.dbForLog()).
		Str("deployment", deployment).
		Str("metrics", metricsURL).Bool("tracing", a.Observability.tracing != nil).
		Int("max_conns", maxConns).Uint64("file_limit", fileLimit())
	if a.Config.RedisCluster() {
		ev = ev.Str("redis", "cluster").Strs("redis_seeds", a.Config.RedisClusterAddrs)
	} else {
		ev = ev.Str("redis", a.Config.redisForLog())
	}
	if a.Config.Queue == QueueStream {
		ev = ev.Str("consumer", a.Config.Consumer).Str("group", a.Config.StreamGroup)
	}
	ev.Msg("seckill listening")
}

// Addr is where the server listens, once started.
func (a *App) Addr() string { return a.addr.String() }

// Shutdown stops accepting, lets in-flight requests finish and the workers drain the queue, all
// within ctx's deadline. Orders a channel still holds then are lost; a stream keeps them pending.
func (a *App) Shutdown(ctx context.Context) error {
	var errs []error
	if err := a.srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	}
	if err := a.Queue.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close queue: %w", err))
	}
	if err := a.bg.drain(ctx); err != nil {
		errs = append(errs, fmt.Errorf("queue not drained before the shutdown deadline: %w", err))
	} else {
		a.Log.Info().Msg("queue drained")
	}
	a.bg.stop()
	if err := <-a.serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	if err := a.Observability.shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Run starts the service and shuts it down gracefully when ctx ends.
func (a *App) Run(ctx context.Context) error {
	if err := a.Start(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-a.serveErr:
		a.serveErr <- err
		a.Log.Error().Err(err).Msg("http server stopped")
	}
	a.Log.Info().Str("deadline", a.Config.ShutdownTimeout.String()).Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), a.Config.ShutdownTimeout)
	defer cancel()
	return a.Shutdown(sctx)
}

// provideReady is the readiness probe: Redis and the database answer.
func provideReady(rdb redis.UniversalClient, db *bun.DB) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		if err := db.PingContext(ctx); err != nil {
			return fmt.Errorf("database: %w", err)
		}
		return nil
	}
}

// DeploymentKey, under the key prefix, names the database the prefix belongs to.
const DeploymentKey = "deployment"

// ErrForeignRedis: the Redis key prefix belongs to another database.
var ErrForeignRedis = errors.New("the Redis key prefix belongs to another deployment")

// BindDeployment writes the database's deployment id under <prefix>deployment when Redis has none and
// refuses another (shared prefixes take each other's orders); the database never adopts Redis's id.
func BindDeployment(ctx context.Context, db bun.IDB, rdb redis.UniversalClient, c Config) (string, error) {
	id, err := mysqlstore.DeploymentID(ctx, db)
	if err != nil {
		return "", err
	}
	key := c.KeyPrefix + DeploymentKey
	if err := rdb.SetNX(ctx, key, id, 0).Err(); err != nil {
		return "", fmt.Errorf("write the deployment id to Redis (%s): %w", key, err)
	}
	got, err := rdb.Get(ctx, key).Result()
	if err != nil {
		return "", fmt.Errorf("read the deployment id from Redis (%s): %w", key, err)
	}
	if got != id {
		where := c.redisForLog()
		if c.RedisCluster() {
			where = fmt.Sprintf("cluster %v", c.RedisClusterAddrs)
		}
		return "", fmt.Errorf("%w: Redis %s under SECKILL_KEY_PREFIX=%q carries deployment %s, and this database (%s) is deployment %s. "+
			"Two deployments sharing a Redis key prefix take each other's orders. "+
			"Give this one its own SECKILL_KEY_PREFIX (or its own Redis: SECKILL_REDIS_URL / SECKILL_REDIS_CLUSTER_ADDRS), "+
			"or point SECKILL_MYSQL_DSN at the database of deployment %s. "+
			"Only if that deployment is gone for good: DEL %s in Redis, and this one takes the prefix over",
			ErrForeignRedis, where, c.KeyPrefix, got, c.dbForLog(), id, got, key)
	}
	return id, nil
}

// BuildReconcile wires the operator's reconcile tool; in stream mode the gate's streams are the backlog.
func BuildReconcile(c Config, log zerolog.Logger) (*application.ReconcileVoucher, func(), error) {
	rdb, closeRedis, err := NewRedis(c, log)
	if err != nil {
		return nil, nil, err
	}
	db, closeDB, err := NewDB(c, log)
	if err != nil {
		closeRedis()
		return nil, nil, err
	}
	cleanup := func() { closeDB(); closeRedis() }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := BindDeployment(ctx, db, rdb, c); err != nil {
		cleanup()
		return nil, nil, err
	}
	vouchers, orders := mysqlstore.NewVoucherRepo(db), mysqlstore.NewOrderRepo(db)
	gate := provideGate(rdb, ClaimRedis{rdb}, c, vouchers, orders)
	var backlog ports.QueueBacklog
	if c.Queue == QueueStream {
		backlog = gate
	}
	return application.NewReconcileVoucher(vouchers, orders, gate, backlog), cleanup, nil
}
