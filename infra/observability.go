package infra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/extra/bunotel"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

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
	// workerRetried is the worker's retry hook, nil without metrics.
	workerRetried func(string, time.Duration)

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
		o.workerRetried = o.Metrics.WorkerRetried
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

// TracingConfig is the part of the standard OpenTelemetry environment the
// service reads itself; the OTLP exporter reads the rest (endpoint, headers,
// timeout, TLS) and the SDK the sampler (OTEL_TRACES_SAMPLER), as they
// document. Tracing is off unless these variables ask for it.
type TracingConfig struct {
	SDKDisabled    bool   `env:"OTEL_SDK_DISABLED"`
	Exporter       string `env:"OTEL_TRACES_EXPORTER"`
	Endpoint       string `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
	TracesEndpoint string `env:"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"`
	Protocol       string `env:"OTEL_EXPORTER_OTLP_PROTOCOL"`
	TracesProtocol string `env:"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"`
	ServiceName    string `env:"OTEL_SERVICE_NAME" envDefault:"seckill"`

	// Provider, set in code (tests), traces into it instead of an exporter
	// the variables describe.
	Provider trace.TracerProvider `env:"-"`
}

// Enabled: an explicit provider, OTEL_TRACES_EXPORTER=otlp, or an OTLP
// endpoint with no exporter named; never when OTEL_SDK_DISABLED=true or the
// exporter is "none".
func (t TracingConfig) Enabled() bool {
	return t.Provider != nil || !t.SDKDisabled &&
		(t.Exporter == "otlp" || t.Exporter == "" && (t.Endpoint != "" || t.TracesEndpoint != ""))
}

func (t TracingConfig) check(p *problems) {
	protocol, name := t.TracesProtocol, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if protocol == "" {
		protocol, name = t.Protocol, "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	p.report(
		rule{"OTEL_TRACES_EXPORTER", !slices.Contains([]string{"", "otlp", "none"}, t.Exporter),
			fmt.Sprintf("want otlp or none (the exporters built in), got %q", t.Exporter)},
		rule{name, t.Enabled() && protocol != "" && protocol != "http/protobuf",
			fmt.Sprintf("only http/protobuf is built in (the collector's port 4318), got %q", protocol)},
	)
}

// tracing is the installed instrumentation; nil when tracing is off, so
// nothing sits on the hot path.
type tracing struct {
	provider trace.TracerProvider
	// owned is the provider this process made and must flush at shutdown.
	owned *sdktrace.TracerProvider
}

// newTracing makes the provider and hooks Redis and the database into it.
// The spans carry no command arguments or query values: keys hold login
// tokens, and user ids are not for a tracing backend.
func newTracing(c TracingConfig, rdb redis.UniversalClient, db *bun.DB, log zerolog.Logger) (*tracing, error) {
	if !c.Enabled() {
		return nil, nil
	}
	t := &tracing{provider: c.Provider}
	if t.provider == nil {
		exp, err := otlptracehttp.New(context.Background())
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		res, err := resource.Merge(resource.Default(),
			resource.NewSchemaless(attribute.String("service.name", c.ServiceName)))
		if err != nil {
			return nil, fmt.Errorf("trace resource: %w", err)
		}
		// The SDK reports export failures through a process-wide handler
		// that prints raw lines to stderr; route them to the log instead.
		// Only a process that exports sets it.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn().Err(err).Msg("tracing: spans not exported")
		}))
		t.owned = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.provider = t.owned
	}
	if err := redisotel.InstrumentTracing(rdb,
		redisotel.WithTracerProvider(t.provider), redisotel.WithDBStatement(false)); err != nil {
		return nil, fmt.Errorf("trace redis: %w", err)
	}
	db.AddQueryHook(bunotel.NewQueryHook(
		bunotel.WithTracerProvider(t.provider), bunotel.WithFormattedQueries(false)))
	return t, nil
}

// wrap puts a server span around every request, named by its route pattern
// (never its path, which holds ids), continuing a caller's W3C trace context.
func (t *tracing) wrap(h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	named := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// chi fills a route context it finds rather than making its own, so
		// the route pattern is known here after serving.
		rctx := chi.NewRouteContext()
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx)))
		if p := rctx.RoutePattern(); p != "" {
			span := trace.SpanFromContext(r.Context())
			span.SetName(r.Method + " " + p)
			span.SetAttributes(attribute.String("http.route", p))
		}
	})
	return otelhttp.NewHandler(named, "http",
		otelhttp.WithTracerProvider(t.provider),
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
		// The method alone until the route is known: a path holds ids.
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }),
	)
}

func (t *tracing) shutdown(ctx context.Context) error {
	if t == nil || t.owned == nil {
		return nil
	}
	if err := t.owned.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}
