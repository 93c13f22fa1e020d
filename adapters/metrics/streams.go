package metrics

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
)

// StreamOptions names what a StreamCollector reads: Prefix and Group must be the stream queue's.
type StreamOptions struct {
	Prefix, Group string
	Now           func() time.Time // default time.Now
}

const scrapeTimeout = 2 * time.Second

// StreamCollector reads, in one pipeline per scrape, the gate and order stream
// of every live sale: stock left, backlog, pending entries and the oldest one's
// age. A sale seen ended is not read again, and its series vanish.
type StreamCollector struct {
	rdb                                          redis.UniversalClient
	opts                                         StreamOptions
	live, deadLetter                             string
	stock, backlog, pending, oldest, deadLetters *prometheus.Desc
	failures                                     prometheus.Counter
	mu                                           sync.Mutex                     // one scrape at a time; guards known
	known                                        map[domain.VoucherID]time.Time // the live set's sale ends (zero until read)
}

var _ prometheus.Collector = (*StreamCollector)(nil)

// NewStreamCollector reads through rdb; register it on Metrics.Registry.
func NewStreamCollector(rdb redis.UniversalClient, opts StreamOptions) *StreamCollector {
	if opts.Prefix == "" {
		opts.Prefix = redisschema.DefaultPrefix
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &StreamCollector{
		rdb:        rdb,
		opts:       opts,
		live:       redisschema.LiveSet(opts.Prefix),
		deadLetter: redisschema.DeadLetter(opts.Prefix),
		stock:      desc("gate_stock_remaining", "Stock the Redis gate has left, per live sale.", "voucher"),
		backlog: desc("stream_backlog_orders",
			"Unfinished entries of a live sale's order stream (pending or not yet delivered): orders claimed and not yet in the database.", "voucher"),
		pending: desc("stream_pending_orders",
			"Entries of a live sale's order stream delivered to a consumer and not yet acknowledged.", "voucher"),
		oldest: desc("stream_oldest_pending_age_seconds",
			"Age of the oldest entry delivered and not acknowledged, per live sale: the fulfilment lag (0 when none).", "voucher"),
		deadLetters: desc("dead_letter_records",
			"Records the dead-letter stream keeps, whoever set them aside."),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "stream_collect_errors_total",
			Help: "Scrapes whose read of the streams failed; their per-sale series are missing."}),
		known: map[domain.VoucherID]time.Time{},
	}
}

func (c *StreamCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.stock, c.backlog, c.pending, c.oldest, c.deadLetters} {
		ch <- d
	}
	c.failures.Describe(ch)
}

type saleReads struct {
	vid     domain.VoucherID
	gate    *redis.SliceCmd
	backlog *redis.IntCmd
	pending *redis.XPendingCmd
}

func (c *StreamCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	now := c.opts.Now()
	pipe := c.rdb.Pipeline()
	members := pipe.SMembers(ctx, c.live)
	dead := pipe.XLen(ctx, c.deadLetter)
	var reads []saleReads
	for vid, end := range c.known {
		if end.IsZero() || now.Before(end) {
			reads = append(reads, c.queue(ctx, pipe, vid))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !ignorable(members.Err()) {
		c.fail(ch)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.deadLetters, prometheus.GaugeValue, float64(dead.Val()))

	inSet := map[domain.VoucherID]bool{}
	var fresh []domain.VoucherID
	for _, m := range members.Val() {
		n, err := strconv.ParseInt(m, 10, 64)
		if vid := domain.VoucherID(n); err == nil && n > 0 && !inSet[vid] {
			inSet[vid] = true
			if _, ok := c.known[vid]; !ok {
				fresh = append(fresh, vid)
			}
		}
	}
	maps.DeleteFunc(c.known, func(vid domain.VoucherID, _ time.Time) bool { return !inSet[vid] })
	if len(fresh) > 0 {
		// New to the live set: read now rather than one scrape late.
		pipe := c.rdb.Pipeline()
		for _, vid := range fresh {
			reads = append(reads, c.queue(ctx, pipe, vid))
		}
		read := func(r saleReads) bool { return r.gate.Err() == nil }
		if _, err := pipe.Exec(ctx); err != nil && !slices.ContainsFunc(reads[len(reads)-len(fresh):], read) {
			c.fail(ch)
			return
		}
	}
	for _, r := range reads {
		if inSet[r.vid] {
			c.emit(ch, r, now)
		}
	}
}

func (c *StreamCollector) queue(ctx context.Context, pipe redis.Pipeliner, vid domain.VoucherID) saleReads {
	k := redisschema.KeysFor(c.opts.Prefix, vid)
	return saleReads{
		vid:     vid,
		gate:    pipe.HMGet(ctx, k.Voucher, "stock", "end"),
		backlog: pipe.XLen(ctx, k.Orders),
		pending: pipe.XPending(ctx, k.Orders, c.opts.Group),
	}
}

// emit writes one sale's series, or none when the sale has ended or its gate is gone.
func (c *StreamCollector) emit(ch chan<- prometheus.Metric, r saleReads, now time.Time) {
	if r.gate.Err() != nil {
		return
	}
	vals := r.gate.Val()
	stock, okStock := number(vals[0])
	endMs, okEnd := number(vals[1])
	if !okStock || !okEnd {
		c.known[r.vid] = time.UnixMilli(0) // no gate: treated as ended
		return
	}
	end := time.UnixMilli(endMs)
	c.known[r.vid] = end
	if !now.Before(end) {
		return
	}
	label := strconv.FormatInt(int64(r.vid), 10)
	var pending int64
	oldest := 0.0
	if p, err := r.pending.Result(); err == nil && p.Count > 0 {
		pending = p.Count
		ms, _, _ := strings.Cut(p.Lower, "-")
		if ms, ok := number(ms); ok {
			oldest = max(0, now.Sub(time.UnixMilli(ms)).Seconds())
		}
	}
	ch <- prometheus.MustNewConstMetric(c.stock, prometheus.GaugeValue, float64(stock), label)
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(r.backlog.Val()), label)
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(pending), label)
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest, label)
}

func (c *StreamCollector) fail(ch chan<- prometheus.Metric) {
	c.failures.Inc()
	c.failures.Collect(ch)
}

// ignorable: a missing stream or group (NOGROUP on XPENDING) is an answer, not a failed scrape.
func ignorable(err error) bool { return err == nil || errors.Is(err, redis.Nil) }

// number is v's integer; a missing HMGET field (nil) is not one.
func number(v any) (int64, bool) {
	s, _ := v.(string)
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// roomCollector exposes the waiting rooms as this instance last read them: no scrape asks Redis.
type roomCollector struct {
	figures                              func(now time.Time) []application.RoomFigures
	waiting, admitted, used, lapsed, age *prometheus.Desc
}

func (m *Metrics) Rooms(figures func(now time.Time) []application.RoomFigures) {
	m.reg.MustRegister(&roomCollector{
		figures:  figures,
		waiting:  desc("room_waiting", "Users in the sale's waiting room not admitted yet.", "voucher"),
		admitted: desc("room_admitted", "Places the sale's waiting room has admitted (passes issued).", "voucher"),
		used:     desc("room_passes_used", "Passes used by a successful claim.", "voucher"),
		lapsed:   desc("room_passes_expired", "Admitted places whose pass expired unused; each went to the next in line.", "voucher"),
		age: desc("room_view_age_seconds",
			"How old this instance's view of the room is (it reads the room at most every 250 ms, when polled).", "voucher"),
	})
}

func (c *roomCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.waiting, c.admitted, c.used, c.lapsed, c.age} {
		ch <- d
	}
}

func (c *roomCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, f := range c.figures(now) {
		id := strconv.FormatInt(int64(f.Voucher), 10)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(f.Waiting), id)
		ch <- prometheus.MustNewConstMetric(c.admitted, prometheus.GaugeValue, float64(f.Admitted), id)
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.CounterValue, float64(f.Used), id)
		ch <- prometheus.MustNewConstMetric(c.lapsed, prometheus.CounterValue, float64(f.Lapsed), id)
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, now.Sub(f.ReadAt).Seconds(), id)
	}
}
