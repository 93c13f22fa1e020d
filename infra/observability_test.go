package infra

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/metrics"
)

func TestTracingIsOffUnlessOTELSaysSo(t *testing.T) {
	for _, c := range []struct {
		name string
		vars map[string]string
		on   bool
	}{
		{"nothing_set", nil, false},
		{"exporter_otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"endpoint_only", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{"traces_endpoint_only", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{"exporter_none_wins", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, false},
		{"sdk_disabled_wins", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := LoadConfigFrom(c.vars)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Tracing.Enabled(); got != c.on {
				t.Fatalf("tracing enabled %v, want %v", got, c.on)
			}
		})
	}
}

func TestObservabilityConfigIsChecked(t *testing.T) {
	for _, c := range []struct {
		name, want string
		vars       map[string]string
	}{
		{"exporter_not_built_in", "OTEL_TRACES_EXPORTER", map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}},
		{"grpc_protocol", "OTEL_EXPORTER_OTLP_PROTOCOL", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
		{"metrics_addr_not_host_port", "SECKILL_METRICS_ADDR", map[string]string{"SECKILL_METRICS_ADDR": "9090"}},
		{"metrics_on_the_api_listener", "SECKILL_METRICS_ADDR", map[string]string{"SECKILL_METRICS_ADDR": "127.0.0.1:8080"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadConfigFrom(c.vars)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %s", err, c.want)
			}
		})
	}
	for _, off := range []string{"off"} {
		cfg, err := LoadConfigFrom(map[string]string{"SECKILL_METRICS_ADDR": off})
		if err != nil || cfg.MetricsEnabled() {
			t.Fatalf("SECKILL_METRICS_ADDR=%s: enabled %v, error %v", off, cfg.MetricsEnabled(), err)
		}
	}
	if !DefaultConfig().MetricsEnabled() || DefaultConfig().MetricsAddr != "127.0.0.1:9090" {
		t.Fatalf("metrics default %q, want on, on loopback", DefaultConfig().MetricsAddr)
	}
}

// TestNothingIsInstalledWhenObservabilityIsOff: no tracing, no metrics, and
// the handler served is the router itself.
func TestNothingIsInstalledWhenObservabilityIsOff(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.MetricsAddr = "off"
	app, cleanup, err := Build(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	o := app.Observability
	if o.tracing != nil || o.Metrics != nil {
		t.Fatalf("installed with everything off: tracing %v, metrics %v", o.tracing != nil, o.Metrics != nil)
	}
	if h := o.tracing.wrap(app.Handler); h != app.Handler {
		t.Fatal("the API handler is wrapped with tracing off")
	}
	if _, wrapped := app.Queue.(*metrics.OrderQueue); wrapped {
		t.Fatal("queue decorated with metrics off")
	}
}
