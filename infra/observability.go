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

	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/ports"
)

// MetricsEnabled tells whether /metrics is served.
func (c Config) MetricsEnabled() bool { return c.MetricsAddr != "" && c.MetricsAddr != "off" }

// Observability is the metrics (nil when off) and their listener, and the tracing (nil unless OTEL_* asks).
type Observability struct {
	Metrics *metrics.Metrics
	tracing *tracing
	// What the graph takes from here, counted when metrics are on (a nil ClaimObserver costs nothing).
	Orders        ports.OrderRepository
	Lifecycle     ports.OrderLifecycle
	ClaimObserver httpapi.ClaimObserver
	workerRetried func(string, time.Duration)

	srv  *http.Server
	addr net.Addr
	done chan error
}

// provideObservability hooks the metrics that need no queue; it holds the tracing to flush it last.
func provideObservability(c Config, rdb redis.UniversalClient, t *tracing, orders *mysqlstore.OrderRepo, counter *metrics.ClaimCounter,
	sessions *redissession.Sessions, rooms *application.RoomDirectory, log zerolog.Logger,
) *Observability {
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
			// Any hook on the client makes the pipeliner read the goroutine id on every wait (docs/BENCHMARKS.md).
			log.Info().Msg("metrics: Redis command counters are off while the claim path auto-pipelines (Tuning.RedisAutoPipeline=off turns them on)")
		}
		o.Metrics.SoldOutAnswers(counter.Saved)
		o.Metrics.Rooms(rooms.Figures)
		if s := sessions; s.Tracking() {
			o.Metrics.SessionCache(metrics.SessionStats{Entries: s.Cached, Reports: s.Reports, ReadBack: s.Prefetched, Skipped: s.Skipped,
				Warmed: func() int64 { return s.WarmProgress().Cached }, Serving: s.Serving, Downs: s.Downs})
		}
	}
	return o
}

// start serves /metrics on its own listener, so it can stay on loopback.
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
	// The API's protections: idle keep-alives here once took the process's files.
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

// shutdown is called last, so the drain can be watched and traced.
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

// TracingConfig is the part of the OpenTelemetry environment the service reads itself.
type TracingConfig struct {
	SDKDisabled    bool   `env:"OTEL_SDK_DISABLED"`
	Exporter       string `env:"OTEL_TRACES_EXPORTER"`
	Endpoint       string `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
	TracesEndpoint string `env:"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"`
	Protocol       string `env:"OTEL_EXPORTER_OTLP_PROTOCOL"`
	TracesProtocol string `env:"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"`
	ServiceName    string `env:"OTEL_SERVICE_NAME" envDefault:"seckill"`
	// Provider, set in code (tests), replaces the exporter.
	Provider trace.TracerProvider `env:"-"`
}

// Enabled: a provider, OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint with no
// exporter named; never with OTEL_SDK_DISABLED=true.
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

// tracing is nil when off, so nothing sits on the hot path.
type tracing struct {
	provider trace.TracerProvider
	owned    *sdktrace.TracerProvider // made here, flushed at shutdown
}

// provideTracing hooks Redis into the provider (provideDB the database); spans carry no values (keys hold login tokens).
func provideTracing(cfg Config, rdb redis.UniversalClient, log zerolog.Logger) (*tracing, error) {
	c := cfg.Tracing
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
		// Else the SDK prints export failures to stderr.
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
	return t, nil
}

// provideDB opens the database (NewDB), whose queries are traced when t is on.
func provideDB(c Config, t *tracing, log zerolog.Logger) (*bun.DB, func(), error) {
	db, cleanup, err := NewDB(c, log)
	if err != nil || t == nil {
		return db, cleanup, err
	}
	return db.WithQueryHook(bunotel.NewQueryHook(
		bunotel.WithTracerProvider(t.provider), bunotel.WithFormattedQueries(false))), cleanup, nil
}

// wrap puts a server span named by its route pattern around every request, continuing a caller's trace.
func (t *tracing) wrap(h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	named := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// chi fills a route context it finds, so the pattern is known after.
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
