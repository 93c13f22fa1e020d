package metrics_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

func TestOutcomesAreClosed(t *testing.T) {
	m := metrics.New()
	for _, code := range []string{"success", "sold_out", "internal", "unavailable", "forbidden", "made_up", "outcome_unknown"} {
		m.ClaimAnswered(m.ClaimStarted(context.Background()), code, time.Millisecond)
	}
	reg := m.Registry()
	if n := testutil.CollectAndCount(reg, "seckill_claims_total"); n != len(metrics.Outcomes()) {
		t.Fatalf("%d outcome series, want exactly the %d outcomes", n, len(metrics.Outcomes()))
	}
	want := `
# HELP seckill_claims_total Claim requests by the outcome answered.
# TYPE seckill_claims_total counter
seckill_claims_total{outcome="bad_request"} 0
seckill_claims_total{outcome="busy"} 0
seckill_claims_total{outcome="duplicate"} 0
seckill_claims_total{outcome="ended"} 0
seckill_claims_total{outcome="error"} 4
seckill_claims_total{outcome="not_found"} 0
seckill_claims_total{outcome="not_started"} 0
seckill_claims_total{outcome="outcome_unknown"} 1
seckill_claims_total{outcome="pass_expired"} 0
seckill_claims_total{outcome="pass_required"} 0
seckill_claims_total{outcome="paused"} 0
seckill_claims_total{outcome="rate_limited"} 0
seckill_claims_total{outcome="sold_out"} 1
seckill_claims_total{outcome="success"} 1
seckill_claims_total{outcome="unauthorized"} 0
`
	if err := testutil.GatherAndCompare(reg, stringsReader(want), "seckill_claims_total"); err != nil {
		t.Fatal(err)
	}
}

// TestRoundTripsAreChargedToTheirClaim: commands and pipelines sent in a
// claim's context count for that claim; others only in the totals.
func TestRoundTripsAreChargedToTheirClaim(t *testing.T) {
	rdb := newRedis(t)
	// Warm the connection first: its handshake (HELLO, sent lazily by
	// go-redis, also before a connection's first pipeline) goes through the
	// hooks too, and would be charged to the claim that happened to use it.
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rdb.Pipelined(context.Background(), func(p redis.Pipeliner) error { return p.Ping(context.Background()).Err() }); err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	m.InstrumentRedis(rdb)
	ctx := m.ClaimStarted(context.Background())
	// The claim's budget context (WithoutCancel + timeout) keeps the value.
	inner, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	rdb.Set(inner, "x", 1, 0)
	pipe := rdb.Pipeline()
	pipe.Set(inner, "a", 1, 0)
	pipe.Set(inner, "b", 1, 0)
	_, _ = pipe.Exec(inner)
	rdb.Get(context.Background(), "unrelated")
	m.ClaimAnswered(ctx, "success", time.Millisecond)

	if n := testutil.ToFloat64(counterOf(t, m, "seckill_redis_commands_total")); n < 2 {
		t.Errorf("%v commands counted, want at least 2", n)
	}
	if n := testutil.ToFloat64(counterOf(t, m, "seckill_redis_pipelines_total")); n < 1 {
		t.Errorf("%v pipelines counted, want at least 1", n)
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "seckill_claim_redis_round_trips" {
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() != 2 {
				t.Fatalf("round trips per claim: %d claims, sum %v; want 1 claim with 2", h.GetSampleCount(), h.GetSampleSum())
			}
			return
		}
	}
	t.Fatal("seckill_claim_redis_round_trips missing")
}

var _ redis.Hook = (*pipelines)(nil)

// TestFulfilmentCounters: a committed batch counts its size and its new
// orders once; a replay of the same batch counts the batch but no new order.
func TestFulfilmentCounters(t *testing.T) {
	ctx := context.Background()
	vouchers := memory.NewVouchers()
	now := time.Now()
	sale, _ := domain.NewSale(10, now.Add(-time.Minute), now.Add(time.Hour))
	v, _ := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "t"}, sale)
	v, err := vouchers.AddSeckill(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	repo := m.OrderRepository(memory.NewOrders(vouchers))
	var orders []domain.VoucherOrder
	for u := 1; u <= 3; u++ {
		id, _ := domain.NewOrderID(now, uint32(u))
		o, _ := domain.NewVoucherOrder(id, domain.UserID(u), v.ID())
		orders = append(orders, o)
	}
	for range 2 {
		if _, err := repo.CreateBatch(ctx, orders); err != nil {
			t.Fatal(err)
		}
	}
	q := m.OrderQueue(nopQueue{})
	if err := q.DeadLetter(ctx, []ports.Delivery{{Order: orders[0]}}, domain.FailUndeliverable); err != nil {
		t.Fatal(err)
	}
	m.WorkerRetried(metrics.StageFulfil, 50*time.Millisecond)
	m.WorkerRetried("something new", 100*time.Millisecond)

	want := `
# HELP seckill_orders_written_total Orders newly recorded in the database, by state (created or failed); redeliveries are not counted again.
# TYPE seckill_orders_written_total counter
seckill_orders_written_total{state="created"} 3
seckill_orders_written_total{state="failed"} 0
# HELP seckill_dead_letters_total Orders the worker gave up on and set aside, by failure reason.
# TYPE seckill_dead_letters_total counter
seckill_dead_letters_total{reason="undeliverable"} 1
# HELP seckill_worker_retries_total Worker retries after a failure, by stage (receive from the queue, fulfil a batch).
# TYPE seckill_worker_retries_total counter
seckill_worker_retries_total{stage="fulfil"} 2
seckill_worker_retries_total{stage="receive"} 0
# HELP seckill_worker_backoff_seconds_total Time workers spent waiting before a retry, by stage.
# TYPE seckill_worker_backoff_seconds_total counter
seckill_worker_backoff_seconds_total{stage="fulfil"} 0.15000000000000002
seckill_worker_backoff_seconds_total{stage="receive"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), stringsReader(want),
		"seckill_orders_written_total", "seckill_dead_letters_total", "seckill_worker_retries_total", "seckill_worker_backoff_seconds_total"); err != nil {
		t.Fatal(err)
	}
	mfs, _ := m.Registry().Gather()
	for _, mf := range mfs {
		switch mf.GetName() {
		case "seckill_batch_size_orders":
			if h := mf.GetMetric()[0].GetHistogram(); h.GetSampleCount() != 2 || h.GetSampleSum() != 6 {
				t.Errorf("batch sizes: %d batches summing %v, want 2 summing 6", h.GetSampleCount(), h.GetSampleSum())
			}
		case "seckill_claim_to_commit_seconds":
			if h := mf.GetMetric()[0].GetHistogram(); h.GetSampleCount() != 3 || h.GetSampleSum() > 3*2 {
				t.Errorf("claim to commit: %d observations summing %vs, want 3 of at most 2s", h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
}

type nopQueue struct{ ports.OrderQueue }

func (nopQueue) DeadLetter(context.Context, []ports.Delivery, domain.FailureReason) error { return nil }

// counterOf gathers one unlabelled counter as a collector testutil can read.
func counterOf(t *testing.T, m *metrics.Metrics, name string) prometheus.Collector {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "copy"})
			c.Add(mf.GetMetric()[0].GetCounter().GetValue())
			return c
		}
	}
	t.Fatalf("%s missing", name)
	return nil
}

// Without a Redis hook to count round trips (the auto-pipelined claim path),
// a claim keeps its own context, so the router copies no request for it, and
// its latency is still observed.
func TestClaimWithoutARedisHookKeepsItsContext(t *testing.T) {
	m := metrics.New()
	ctx := context.Background()
	if got := m.ClaimStarted(ctx); got != ctx {
		t.Fatal("ClaimStarted made a new context with no Redis hook to count for it")
	}
	m.ClaimAnswered(ctx, "success", 3*time.Millisecond)
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if h := mf.GetMetric()[0].GetHistogram(); h != nil {
			counts[mf.GetName()] = h.GetSampleCount()
		}
	}
	if counts["seckill_claim_duration_seconds"] != 1 || counts["seckill_claim_redis_round_trips"] != 0 {
		t.Fatalf("latency observations %d (want 1), round-trip observations %d (want 0)",
			counts["seckill_claim_duration_seconds"], counts["seckill_claim_redis_round_trips"])
	}
}
