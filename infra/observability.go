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

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/adapters/redisstream"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/ports"
)

// MetricsEnabled tells whether /metrics is served.
func (c Config) MetricsEnabled() bool { return c.MetricsAddr != "" && c.MetricsAddr != "off" }

// Observability is what the service tells operators besides its logs: the
// metrics (nil when SECKILL_METRICS_ADDR is off) and their listener, and
// the tracing (none unless OTEL_* asks for it).
type Observability struct {
	Metrics *metrics.Metrics
	tracing *tracing
	// What the graph takes from here (wire.FieldsOf): the order repository
	// and lifecycle, counted when metrics are on; the router's claim
	// observer, nil without metrics, so that the claim path pays nothing.
	Orders        ports.OrderRepository
	Lifecycle     ports.OrderLifecycle
	ClaimObserver httpapi.ClaimObserver

	srv  *http.Server
	addr net.Addr
	done chan error
}

// provideObservability makes the registry and hooks the instruments that
// need no queue into the clients (Redis round trips, sold-out answers) and
// the order repository (expiries, returns, payments), and the tracing of
// Redis and the database when it is on.
func provideObservability(c Config, rdb redis.UniversalClient, db *bun.DB, orders *mysqlstore.OrderRepo, counter *metrics.ClaimCounter,
	sessions *redissession.Sessions, rooms *application.RoomDirectory, log zerolog.Logger,
) (*Observability, error) {
	t, err := newTracing(c.Tracing, rdb, db, log)
	if err != nil {
		return nil, err
	}
	o := &Observability{tracing: t, Orders: orders, Lifecycle: orders}
	if c.MetricsEnabled() {
		o.Metrics = metrics.New()
		o.Orders = o.Metrics.OrderRepository(orders)
		o.Lifecycle = o.Metrics.OrderLifecycle(orders)
		o.ClaimObserver = o.Metrics
		if c.RedisAutoPipeline == AutoPipelineOff || c.Tracing.Enabled() {
			o.Metrics.InstrumentRedis(rdb)
		} else {
			// Any hook on the client makes go-redis's pipeliner read the
			// goroutine id on every wait: 30% of a claim's CPU
			// (docs/BENCHMARKS.md). The Redis counters and the per-claim
			// round trips are for a service that does not auto-pipeline.
			log.Info().Msg("metrics: Redis command counters are off while the claim path auto-pipelines (Tuning.RedisAutoPipeline=off turns them on)")
		}
		o.Metrics.SoldOutAnswers(counter.Saved)
		o.Metrics.Rooms(rooms.Figures)
		if s := sessions; s.Tracking() {
			o.Metrics.SessionCache(metrics.SessionStats{Entries: s.Cached, Reports: s.Reports, ReadBack: s.Prefetched, Skipped: s.Skipped,
				Warmed: func() int64 { return s.WarmProgress().Cached }, Serving: s.Serving, Downs: s.Downs})
		}
	}
	return o, nil
}

// workerRetried is the worker's retry hook, nil without metrics.
func (o *Observability) workerRetried() func(string, time.Duration) {
	if o.Metrics == nil {
		return nil
	}
	return o.Metrics.WorkerRetried
}

func provideObservedChannelQueue(q *chanqueue.Queue, o *Observability) ports.OrderQueue {
	if o.Metrics == nil {
		return q
	}
	o.Metrics.ChannelQueue(q.Len)
	return o.Metrics.OrderQueue(q)
}

func provideObservedStreamQueue(q *redisstream.Queue, rdb redis.UniversalClient, c Config, o *Observability) ports.OrderQueue {
	if o.Metrics == nil {
		return q
	}
	o.Metrics.Registry().MustRegister(metrics.NewStreamCollector(rdb, metrics.StreamOptions{
		Prefix: c.KeyPrefix, Group: c.StreamGroup,
	}))
	return o.Metrics.OrderQueue(q)
}

// start serves /metrics on its own listener, apart from the API, so it can
// stay on loopback (or behind its own firewall rule) whatever the API does.
func (o *Observability) start(c Config) error {
	if o.Metrics == nil {
		return nil
	}
	l, err := net.Listen("tcp", c.MetricsAddr)
	if err != nil {
		return listenError("metrics", "SECKILL_METRICS_ADDR", c.MetricsAddr, err)
	}
	o.addr = l.Addr()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", o.Metrics.Handler())
	// The API's protections: 20,000 idle keep-alives here once took the
	// process's files and the API's claims with them, and 800 unfinished
	// 1 MiB headers grew it by 1.2 GB.
	o.srv, l = newAPIServer(mux, l, metricsMaxConns)
	o.done = make(chan error, 1)
	go func() { o.done <- o.srv.Serve(l) }()
	return nil
}

// MetricsAddr is where /metrics is served, or "" when it is not.
func (o *Observability) MetricsAddr() string {
	if o.addr == nil {
		return ""
	}
	return o.addr.String()
}

// shutdown stops the metrics listener and flushes the traces; the service
// calls it last, so the drain can be watched and traced.
func (o *Observability) shutdown(ctx context.Context) error {
	var err error
	if o.srv != nil {
		err = o.srv.Shutdown(ctx)
		if serr := <-o.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		if err != nil {
			err = fmt.Errorf("metrics shutdown: %w", err)
		}
	}
	return errors.Join(err, o.tracing.shutdown(ctx))
}

// metricsURL is for the start log line: where to scrape, or "off".
func (o *Observability) metricsURL() string {
	if a := o.MetricsAddr(); a != "" {
		return "http://" + a + "/metrics"
	}
	return "off"
}
