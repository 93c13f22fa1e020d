package infra_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/infra"
)

// TestPortClashNamesTheVariables: a second instance started on a host where
// the first holds the port is told which variable to change, for either
// listener, and that both must differ between two instances.
func TestPortClashNamesTheVariables(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().String()
	for _, tc := range []struct {
		name           string
		http, metrics  string
		wantVariable   string
		wantListenerOf string
	}{
		{name: "api_port_taken", http: taken, metrics: "127.0.0.1:0", wantVariable: "set SECKILL_HTTP_ADDR", wantListenerOf: "the API"},
		{name: "metrics_port_taken", http: "127.0.0.1:0", metrics: taken, wantVariable: "set SECKILL_METRICS_ADDR", wantListenerOf: "metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := infra.DefaultConfig()
			c.Queue = infra.QueueChannel
			c.HTTPAddr, c.MetricsAddr = tc.http, tc.metrics
			c.DataDir = t.TempDir()
			app, cleanup, err := infra.Build(c, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cleanup)
			err = app.Start(context.Background())
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = app.Shutdown(ctx)
				t.Fatalf("started on %s, which another listener holds", taken)
			}
			msg := err.Error()
			for _, want := range []string{tc.wantListenerOf, taken, tc.wantVariable, "SECKILL_HTTP_ADDR and SECKILL_METRICS_ADDR apart"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
		})
	}
}
