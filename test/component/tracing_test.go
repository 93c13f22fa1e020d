package component_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestClaimIsTracedThroughRedis: with tracing on (here into an in-memory
// recorder instead of an OTLP exporter), a claim yields a server span named
// by its route, with the claim's Redis calls as its children, and the
// database writes of the worker are traced too.
func TestClaimIsTracedThroughRedis(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	cfg := embeddedConfig(t, infra.QueueStream)
	cfg.MetricsAddr = "off"
	cfg.Tracing.Provider = tp
	app := run(t, cfg, zerolog.Nop())
	base := "http://" + app.Addr()
	vid := createVoucher(t, app, 10)
	tok, err := redissession.New(app.Redis, redissession.Options{TTL: time.Hour}).Mint(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, env := postJSON(t, http.DefaultClient, fmt.Sprintf("%s/voucher-order/seckill/%d", base, vid), tok, nil); !env.Success {
		t.Fatalf("claim: %+v", env)
	}

	const route = "POST /voucher-order/seckill/{id}"
	testenv.Eventually(t, 10*time.Second, func() (bool, string) {
		var server sdktrace.ReadOnlySpan
		var redisChildren, sql int
		for _, s := range rec.Ended() {
			if s.Name() == route && s.SpanKind() == trace.SpanKindServer {
				server = s
			}
		}
		var names []string
		for _, s := range rec.Ended() {
			names = append(names, s.Name())
			if server != nil && s.Parent().SpanID() == server.SpanContext().SpanID() && isRedis(s) {
				redisChildren++
			}
			if isSQL(s) {
				sql++
			}
		}
		return server != nil && redisChildren > 0 && sql > 0,
			fmt.Sprintf("server span %v, %d Redis children, %d SQL spans; spans: %q", server != nil, redisChildren, sql, names)
	})
}

func isRedis(s sdktrace.ReadOnlySpan) bool {
	for _, a := range s.Attributes() {
		if (a.Key == "db.system" || a.Key == "db.system.name") && a.Value.AsString() == "redis" {
			return true
		}
	}
	return false
}

func isSQL(s sdktrace.ReadOnlySpan) bool {
	for _, a := range s.Attributes() {
		if (a.Key == "db.system" || a.Key == "db.system.name") && a.Value.AsString() != "redis" {
			return true
		}
	}
	return false
}
