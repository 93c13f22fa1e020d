package infra

import (
	"context"
	"fmt"
	"net/http"
	"slices"

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
)

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
