package metrics_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

const prefix = "mt:"

func newRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	mr := miniredis.RunT(t)
	// RESP2 without identity: a new connection sends no handshake through
	// the hooks, so round-trip counts are exact.
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func preheat(t *testing.T, rdb redis.UniversalClient, id domain.VoucherID, stock int, begin, end time.Time) {
	t.Helper()
	sale, err := domain.NewSale(stock, begin, end)
	if err != nil {
		t.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "t"}, sale)
	if err != nil {
		t.Fatal(err)
	}
	if err := redisgate.New(rdb, redisgate.Options{Prefix: prefix}).Preheat(context.Background(), v.WithID(id)); err != nil {
		t.Fatal(err)
	}
}

// pipelines counts the round trips a scrape makes.
type pipelines struct{ commands, pipelines atomic.Int64 }

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { p.commands.Add(1); return next(ctx, cmd) }
}
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { p.pipelines.Add(1); return next(ctx, cmds) }
}

func TestStreamCollectorShowsLiveSalesOnly(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	start := time.Now().Truncate(time.Millisecond)
	now := start
	c := metrics.NewStreamCollector(rdb, metrics.StreamOptions{Prefix: prefix, Group: "g", Now: func() time.Time { return now }})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	preheat(t, rdb, 7, 5, start.Add(-time.Minute), start.Add(time.Minute))
	preheat(t, rdb, 8, 3, start.Add(-time.Minute), start.Add(time.Hour))
	// Voucher 7: three orders appended, two delivered to a consumer.
	orders := redisschema.KeysFor(prefix, 7).Orders
	for i := 0; i < 3; i++ {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: orders, Values: []any{"id", i}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.XGroupCreate(ctx, orders, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{orders, ">"}, Count: 2}).Err(); err != nil {
		t.Fatal(err)
	}
	now = start.Add(3 * time.Second)

	count := func(name string) int { return testutil.CollectAndCount(c, name) }
	get := func(name string, vid int) float64 {
		t.Helper()
		want := "voucher=\"" + strconv.Itoa(vid) + "\""
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if "voucher=\""+l.GetValue()+"\"" == want {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		t.Fatalf("%s{%s} missing", name, want)
		return 0
	}
	if n := count("seckill_stream_backlog_orders"); n != 2 {
		t.Fatalf("%d backlog series, want 2 (both sales live)", n)
	}
	if got := get("seckill_stream_backlog_orders", 7); got != 3 {
		t.Errorf("backlog of 7: %v, want 3", got)
	}
	if got := get("seckill_stream_pending_orders", 7); got != 2 {
		t.Errorf("pending of 7: %v, want 2", got)
	}
	if got := get("seckill_stream_oldest_pending_age_seconds", 7); got < 2 || got > 60 {
		t.Errorf("oldest pending age of 7: %vs, want about 3s", got)
	}
	if got := get("seckill_stream_pending_orders", 8); got != 0 {
		t.Errorf("pending of 8 (no stream, no group): %v, want 0", got)
	}
	if got := get("seckill_gate_stock_remaining", 8); got != 3 {
		t.Errorf("stock of 8: %v, want 3", got)
	}

	// Steady state: one round trip per scrape, whatever the number of sales.
	rt := &pipelines{}
	rdb.AddHook(rt)
	count("seckill_stream_backlog_orders")
	if p, cmds := rt.pipelines.Load(), rt.commands.Load(); p != 1 || cmds != 0 {
		t.Errorf("a scrape made %d pipelines and %d single commands, want 1 and 0", p, cmds)
	}

	// Sale 7 ends: its series go, sale 8's stay; and it is not read again.
	now = start.Add(2 * time.Minute)
	if n := count("seckill_stream_backlog_orders"); n != 1 {
		t.Fatalf("%d backlog series after sale 7 ended, want 1", n)
	}
	get("seckill_stream_backlog_orders", 8)
	// Sale 8 leaves the live set (its keys expired): nothing per voucher left.
	if err := rdb.SRem(ctx, redisschema.LiveSet(prefix), "8").Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"seckill_stream_backlog_orders", "seckill_stream_pending_orders", "seckill_gate_stock_remaining", "seckill_stream_oldest_pending_age_seconds"} {
		if n := count(name); n != 0 {
			t.Errorf("%d %s series with no live sale, want 0", n, name)
		}
	}
	if n := count("seckill_dead_letter_records"); n != 1 {
		t.Errorf("dead-letter gauge missing")
	}
}

func TestStreamCollectorReportsAFailedScrape(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	c := metrics.NewStreamCollector(rdb, metrics.StreamOptions{Prefix: prefix, Group: "g"})
	mr.Close()
	if err := testutil.CollectAndCompare(c, stringsReader(`
# HELP seckill_stream_collect_errors_total Scrapes whose read of the streams failed; their per-sale series are missing.
# TYPE seckill_stream_collect_errors_total counter
seckill_stream_collect_errors_total 1
`)); err != nil {
		t.Fatal(err)
	}
}
