package component_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestMetricsCountWhatWasAnswered drives claims with every kind of answer
// through the real service (embedded backends) and reads them back from
// /metrics on its own listener: the outcome counters match the answers, the
// orders reach the database counters, and (stream driver) the sale's
// per-voucher series are there while it is live and gone once it ended.
func TestMetricsCountWhatWasAnswered(t *testing.T) {
	for _, queue := range []string{infra.QueueChannel, infra.QueueStream} {
		t.Run(queue, func(t *testing.T) {
			cfg := embeddedConfig(t, queue)
			// The Redis counters need a claim path that does not
			// auto-pipeline (a hook costs the pipeliner every wait).
			cfg.RedisAutoPipeline = infra.AutoPipelineOff
			app := run(t, cfg, zerolog.Nop())
			base := "http://" + app.Addr()
			scrapeURL := "http://" + app.Observability.MetricsAddr() + "/metrics"
			if app.Observability.MetricsAddr() == app.Addr() {
				t.Fatalf("metrics served on the API listener %s", app.Addr())
			}
			if resp, err := http.Get(base + "/metrics"); err != nil {
				t.Fatal(err)
			} else if resp.Body.Close(); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("GET /metrics on the API listener: %d, want 404", resp.StatusCode)
			}

			// A sale of 2 that ends in a few seconds.
			end := time.Now().UTC().Add(4 * time.Second).Truncate(time.Second) // the API takes whole seconds
			admin, err := redissession.New(app.Redis, redissession.Options{TTL: time.Hour}).Mint(context.Background(), adminUID)
			if err != nil {
				t.Fatal(err)
			}
			status, env := postJSON(t, http.DefaultClient, base+"/voucher/seckill", admin, map[string]any{
				"shopId": 1, "title": "metrics", "payValue": 100, "actualValue": 1000, "type": 1,
				"stock": 2, "beginTime": time.Now().UTC().Add(-time.Minute).Format(time.RFC3339),
				"endTime": end.Format(time.RFC3339),
			})
			if status != http.StatusOK || !env.Success {
				t.Fatalf("create voucher: %d %+v", status, env)
			}
			var s string
			if err := json.Unmarshal(env.Data, &s); err != nil {
				t.Fatal(err)
			}
			vid, _ := strconv.ParseInt(s, 10, 64)

			store := redissession.New(app.Redis, redissession.Options{TTL: time.Hour})
			token := func(u domain.UserID) string {
				tok, err := store.Mint(context.Background(), u)
				if err != nil {
					t.Fatal(err)
				}
				return tok
			}
			t1, t2, t3 := token(1), token(2), token(3)
			answered := map[string]float64{}
			claim := func(path, tok string) {
				_, env := postJSON(t, http.DefaultClient, base+path, tok, nil)
				code := env.Code
				if env.Success {
					code = "success"
				}
				answered[code]++
			}
			own := fmt.Sprintf("/voucher-order/seckill/%d", vid)
			claim(own, t1)                            // success
			claim(own, t1)                            // duplicate
			claim(own, t2)                            // success
			claim(own, t3)                            // sold_out, from Redis
			claim(own, t3)                            // sold_out, from the mark
			claim(own, "")                            // unauthorized
			claim(own, "no-such-token")               // sold_out: a token on a sold-out sale is answered before its session
			claim("/voucher-order/seckill/99999", "") // unauthorized
			claim("/voucher-order/seckill/abc", t3)   // bad_request
			claim("/voucher-order/seckill/99999", t3) // not_found
			want := map[string]float64{"success": 2, "duplicate": 1, "sold_out": 3, "unauthorized": 2, "bad_request": 1, "not_found": 1}
			for code, n := range want {
				if answered[code] != n {
					t.Fatalf("answers %v, want %v", answered, want)
				}
			}

			fams := scrape(t, scrapeURL)
			for _, o := range []string{"success", "sold_out", "duplicate", "not_started", "ended", "not_found", "busy", "rate_limited", "unauthorized", "bad_request", "error"} {
				if got := value(fams, "seckill_claims_total", "outcome", o); got != answered[o] {
					t.Errorf("seckill_claims_total{outcome=%q} = %v, answered %v", o, got, answered[o])
				}
			}
			if got := histCount(fams, "seckill_claim_duration_seconds"); got != 10 {
				t.Errorf("claim latency observations %d, want 10", got)
			}
			if got := histCount(fams, "seckill_claim_redis_round_trips"); got != 10 {
				t.Errorf("round-trip observations %d, want 10", got)
			}
			if got := value(fams, "seckill_soldout_mark_answers_total", "", ""); got < 1 {
				t.Errorf("sold-out mark answers %v, want at least 1", got)
			}
			if got := value(fams, "seckill_redis_commands_total", "", ""); got < 1 {
				t.Errorf("redis commands %v, want some", got)
			}
			for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
				if fams[name] == nil {
					t.Errorf("%s missing: runtime and process collectors not registered", name)
				}
			}

			// The worker commits both orders.
			testenv.Eventually(t, 10*time.Second, func() (bool, string) {
				fams = scrape(t, scrapeURL)
				n := value(fams, "seckill_orders_written_total", "state", "created")
				return n >= 2, fmt.Sprintf("orders written %v, want 2", n)
			})
			if got := histCount(fams, "seckill_claim_to_commit_seconds"); got != 2 {
				t.Errorf("claim-to-commit observations %d, want 2", got)
			}
			if got := histSum(fams, "seckill_batch_size_orders"); got != 2 {
				t.Errorf("batch sizes sum to %v, want 2", got)
			}

			if queue == infra.QueueChannel {
				if fams["seckill_channel_queue_orders"] == nil {
					t.Error("seckill_channel_queue_orders missing")
				}
				return
			}
			label := strconv.FormatInt(vid, 10)
			for _, name := range []string{"seckill_gate_stock_remaining", "seckill_stream_backlog_orders", "seckill_stream_pending_orders", "seckill_stream_oldest_pending_age_seconds"} {
				if !has(fams, name, "voucher", label) {
					t.Errorf("%s{voucher=%q} missing while the sale is live", name, label)
				}
			}
			if got := value(fams, "seckill_gate_stock_remaining", "voucher", label); got != 0 {
				t.Errorf("stock left %v, want 0", got)
			}
			// Once the sale has ended its series go.
			testenv.Eventually(t, 15*time.Second, func() (bool, string) {
				fams = scrape(t, scrapeURL)
				return !has(fams, "seckill_stream_backlog_orders", "voucher", label),
					fmt.Sprintf("per-voucher series still there %s after the sale ended", time.Since(end))
			})
			if time.Now().Before(end) {
				t.Fatalf("per-voucher series gone before the sale ended")
			}
			if fams["seckill_dead_letter_records"] == nil {
				t.Error("seckill_dead_letter_records missing")
			}
		})
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// find returns the series of name whose label has value (any series when
// label is empty), or nil.
func find(fams map[string]*dto.MetricFamily, name, label, val string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	for _, m := range f.GetMetric() {
		if label == "" {
			return m
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == val {
				return m
			}
		}
	}
	return nil
}

func has(fams map[string]*dto.MetricFamily, name, label, val string) bool {
	return find(fams, name, label, val) != nil
}

func value(fams map[string]*dto.MetricFamily, name, label, val string) float64 {
	m := find(fams, name, label, val)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	return -1
}

func histCount(fams map[string]*dto.MetricFamily, name string) uint64 {
	if m := find(fams, name, "", ""); m != nil {
		return m.GetHistogram().GetSampleCount()
	}
	return 0
}

func histSum(fams map[string]*dto.MetricFamily, name string) float64 {
	if m := find(fams, name, "", ""); m != nil {
		return m.GetHistogram().GetSampleSum()
	}
	return 0
}
