package infra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/claimcount"
	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/adapters/redisbuckets"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/adapters/worker"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/ports"
)

// App is one wired service: what `seckill serve` runs and what in-process
// tests and the bench start.
type App struct {
	Config  Config
	Log     zerolog.Logger
	Handler http.Handler
	Queue   ports.OrderQueue
	Worker  *worker.Worker
	Restore *application.RestoreGate
	Gate    *redisgate.Gate
	Buckets *redisbuckets.Gate
	Tokens  ports.TokenIssuer
	// Sessions resolves login tokens (redissession.Tracked on a Redis
	// that tracks).
	Sessions ports.Sessions
	DB       *bun.DB
	Redis    redis.UniversalClient
	// Observability holds the metrics and their listener.
	Observability *Observability
	// Expire cancels unpaid orders past their pay window (expiryLoop).
	Expire *application.ExpireOrders
	// Claims counts claim answers for the live sale page and keeps their
	// last minute (sampled once a second from Start).
	Claims *claimcount.Counter

	srv       *http.Server
	addr      net.Addr
	workerCtx context.Context
	stopWork  context.CancelFunc
	workers   sync.WaitGroup
	repairs   sync.WaitGroup
	serveErr  chan error
}

// Build wires the service with the injector of the configured queue driver.
func Build(c Config, log zerolog.Logger) (*App, func(), error) {
	switch c.Queue {
	case QueueChannel:
		return InitChannelApp(c, log)
	case QueueStream:
		return InitStreamApp(c, log)
	default:
		return nil, nil, fmt.Errorf("SECKILL_QUEUE=%q is not available", c.Queue)
	}
}

// Start migrates (unless disabled), restores the gate from the database,
// starts the workers and begins serving HTTP. It returns once the listener is
// bound; Addr tells where.
func (a *App) Start(ctx context.Context) error {
	if a.Config.Migrate {
		applied, err := mysqlstore.Migrate(ctx, a.DB)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if len(applied) > 0 {
			a.Log.Info().Strs("migrations", applied).Msg("database migrated")
		}
	}
	// Before anything is written to Redis: a prefix of another deployment's
	// must not receive this database's gates.
	deployment, err := BindDeployment(ctx, a.DB, a.Redis, a.Config)
	if err != nil {
		return err
	}
	// Before any claim: a claim that meets NOSCRIPT waits for a reload.
	if err := a.Gate.LoadScripts(ctx); err != nil {
		return err
	}
	if err := a.Buckets.LoadScripts(ctx); err != nil {
		return err
	}
	rep, err := a.Restore.Handle(ctx)
	a.logHealed(rep.Healed)
	if err != nil {
		return fmt.Errorf("restore gate: %w", err)
	}
	if rep.Restored > 0 {
		a.Log.Info().Int("vouchers", rep.Restored).Msg("gate restored from the database")
	}
	// Housekeeping: a failure leaves the members for the next start.
	if n, err := a.Gate.PruneLive(ctx); err != nil {
		a.Log.Warn().Err(err).Msg("pruning ended sales from the live set failed")
	} else if n > 0 {
		a.Log.Info().Int("vouchers", n).Msg("ended sales pruned from the live set")
	}
	if n, err := a.Buckets.PruneLive(ctx); err != nil {
		a.Log.Warn().Err(err).Msg("pruning ended split sales' buckets from the live set failed")
	} else if n > 0 {
		a.Log.Info().Int("buckets", n).Msg("ended split sales' buckets pruned from the live set")
	}

	a.workerCtx, a.stopWork = context.WithCancel(context.WithoutCancel(ctx))
	a.warmSessions(a.workerCtx)
	for i := 0; i < a.Config.Workers; i++ {
		a.workers.Add(1)
		go func() {
			defer a.workers.Done()
			if err := a.Worker.Run(a.workerCtx); err != nil && !errors.Is(err, context.Canceled) {
				a.Log.Error().Err(err).Msg("worker stopped")
			}
		}()
	}

	if a.Config.RestoreInterval > 0 {
		a.repairs.Add(1)
		go func() {
			defer a.repairs.Done()
			a.repairLoop(a.workerCtx, a.Config.RestoreInterval)
		}()
	}

	a.repairs.Add(1)
	go func() {
		defer a.repairs.Done()
		a.expiryLoop(a.workerCtx, expiryEvery)
	}()

	a.repairs.Add(1)
	go func() {
		defer a.repairs.Done()
		a.Claims.Run(a.workerCtx)
	}()

	l, err := net.Listen("tcp", a.Config.HTTPAddr)
	if err != nil {
		a.stopWork()
		return listenError("the API", "SECKILL_HTTP_ADDR", a.Config.HTTPAddr, err)
	}
	a.addr = l.Addr()
	maxConns := a.Config.maxConns(fileLimit())
	if a.Config.HTTPMaxConns == 0 && maxConns < fewConns {
		// Seen under a container runtime whose file limit was 1,024: the
		// cap became 512 with nothing said, and a stampede meets it.
		a.Log.Warn().Uint64("file_limit", fileLimit()).Int("max_conns", maxConns).
			Msg("the open-file limit cuts the API's connection cap: raise it (ulimit -n, or the container runtime's nofile limit) or set SECKILL_HTTP_MAX_CONNS")
	}
	a.srv, l = newAPIServer(a.Observability.wrapHTTP(a.Handler), l, maxConns)
	a.serveErr = make(chan error, 1)
	go func() { a.serveErr <- a.srv.Serve(l) }()
	if err := a.Observability.start(a.Config); err != nil {
		_ = a.srv.Close()
		<-a.serveErr
		a.stopWork()
		return err
	}

	redisEmbedded, dbEmbedded := a.Config.Embedded()
	ev := a.Log.Info().Str("addr", "http://"+a.addr.String()).Str("queue", a.Config.Queue).
		Bool("embedded_redis", redisEmbedded).Bool("embedded_db", dbEmbedded).Str("db", a.Config.dbForLog()).
		Str("deployment", deployment).
		Str("metrics", a.Observability.metricsURL()).Bool("tracing", a.Observability.tracing != nil).
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
	return nil
}

// warmSessions starts reading the sessions already in Redis into the token
// cache, in the background and paced (redissession.Tracked.Warm), and logs
// when it is done. The cache's Close, at shutdown, stops it.
func (a *App) warmSessions(ctx context.Context) {
	t, ok := a.Sessions.(*redissession.Tracked)
	if !ok || !a.Config.TokenWarm {
		return
	}
	began := time.Now()
	t.Warm()
	go func() {
		select {
		case <-ctx.Done():
		case <-t.WarmedUp():
			p := t.WarmProgress()
			a.Log.Info().Int64("sessions", p.Cached).Int64("read", p.Read).Int64("scans", p.Scans).
				Dur("took", time.Since(began)).Msg("session cache warmed")
		}
	}()
}

// repairLoop restores, every interval, the gate of any live voucher that
// Redis lost (a failover that dropped writes, a flushed node), so the
// instance heals without a restart. Errors are logged and retried next tick.
func (a *App) repairLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, every)
		// A Redis that lost its data lost the binding too: write it back
		// (before the gates) so that another deployment's start on the same
		// prefix is still refused; a foreign one means a second deployment
		// took the prefix while this one ran.
		if _, err := BindDeployment(rctx, a.DB, a.Redis, a.Config); err != nil && ctx.Err() == nil {
			a.Log.Error().Err(err).Msg("deployment binding check failed; retrying at the next interval")
			if errors.Is(err, ErrForeignRedis) {
				cancel() // no repair from this database into another's prefix
				continue
			}
		}
		rep, err := a.Restore.Repair(rctx)
		a.logHealed(rep.Healed)
		// Transfer records of split vouchers whose claimant died between two
		// steps are finished here, so their units are on sale again within
		// one interval (plus the records' apply deadline).
		if moved, terr := a.Buckets.RepairAll(rctx); terr != nil && ctx.Err() == nil {
			a.Log.Error().Err(terr).Int("finished", moved).Msg("finishing bucket transfers failed; retrying at the next interval")
		} else if moved > 0 {
			a.Log.Warn().Int("transfers", moved).Msg("finished bucket transfers left by a claim that stopped between two steps")
		}
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			a.Log.Error().Err(err).Int("repaired", rep.Restored).Msg("gate repair failed; retrying at the next interval")
		case rep.Restored > 0:
			a.Log.Warn().Int("vouchers", rep.Restored).Msg("gate repaired from the database: Redis had lost their state")
		}
	}
}

// logHealed tells, per voucher, what a gate that was behind the database
// got back: Redis had lost writes (a failover to a replica that lagged, a
// restart from an older snapshot) while their orders were committed.
func (a *App) logHealed(healed []application.HealedVoucher) {
	for _, h := range healed {
		a.Log.Warn().Int64("voucher", int64(h.Voucher)).Int("buyers_restored", h.Restored).
			Int("units_retaken", h.Retaken).Int("oversold", h.Oversold).
			Msg("gate healed from the database: Redis had forgotten committed orders (oversold: units it had sold again, which the database refuses)")
	}
}

// Addr is where the server listens, once started.
func (a *App) Addr() string { return a.addr.String() }

// Shutdown stops accepting, lets in-flight requests finish, closes the queue
// and lets the workers drain it into the database, all within ctx's deadline.
// Orders a channel still holds at the deadline are logged and lost; a stream
// keeps them pending for the next start.
func (a *App) Shutdown(ctx context.Context) error {
	var errs []error
	if err := a.srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	}
	if err := a.Queue.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close queue: %w", err))
	}
	drained := make(chan struct{})
	go func() { a.workers.Wait(); close(drained) }()
	select {
	case <-drained:
		a.Log.Info().Msg("queue drained")
	case <-ctx.Done():
		a.stopWork()
		<-drained
		errs = append(errs, fmt.Errorf("queue not drained before the shutdown deadline: %w", ctx.Err()))
	}
	a.stopWork()
	a.repairs.Wait()
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

// ready is the readiness probe: Redis and the database answer.
func ready(rdb redis.UniversalClient, db *bun.DB) func(context.Context) error {
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
