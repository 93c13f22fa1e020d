// Package metrics exposes the service's Prometheus metrics on a registry of its
// own: the claim observer, a go-redis round-trip hook, decorators of the order
// ports, a worker retry hook and a per-sale stream collector. Labels are closed
// sets; the only per-voucher series are those of sales still live.
package metrics

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

const namespace = "seckill"

// OutcomeError is the outcome of every answer whose code is not a known one.
const OutcomeError = "error"

// Outcomes lists the claim outcomes counted under their own label: success,
// every domain refusal, and the edge's answers.
func Outcomes() []string {
	return outcomesWith(OutcomeBusy, "outcome_unknown", "rate_limited", "unauthorized", "bad_request", OutcomeError)
}

func outcomesWith(others ...string) []string {
	out := []string{OutcomeSuccess}
	for _, r := range domain.Refusals() {
		out = append(out, r.Code())
	}
	return append(out, others...)
}

// A claim answers in about a millisecond, a slow one in tens.
var claimBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// Metrics is the service's registry and the instruments the adapters feed; safe for concurrent use.
type Metrics struct {
	reg          *prometheus.Registry
	instrumented atomic.Bool // InstrumentRedis hooked a client: claims count their round trips

	claims                                                 *outcomeCounters
	claimSeconds, claimRoundTrips                          *stripedHistogram
	redisCommands, redisPipelines, expired, returned       prometheus.Counter
	batchSize, batchSeconds, claimToCommit, expiryLag      prometheus.Histogram
	deadLetters, ordersWritten, retries, backoff, payments *prometheus.CounterVec
}

// New registers the runtime, process and service instruments on a new registry (never the global one).
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := factory{reg}
	return &Metrics{
		reg: reg,
		// Every outcome is there from the start, at 0, so rate() and absent() behave before the first sale.
		claims: register(reg, newOutcomeCounters("claims_total",
			"Claim requests by the outcome answered.", Outcomes())),
		claimSeconds: register(reg, newStripedHistogram("claim_duration_seconds",
			"Time from a claim request's arrival at the router to its answer, whatever the answer.", claimBuckets)),
		claimRoundTrips: register(reg, newStripedHistogram("claim_redis_round_trips",
			"Redis round trips (commands or pipelines) one claim request made, session lookup and ID lease included.",
			[]float64{0, 1, 2, 3, 4, 6, 8})),
		redisCommands: f.counter("redis_commands_total",
			"Redis commands sent one at a time (each a round trip), by every part of the service."),
		redisPipelines: f.counter("redis_pipelines_total",
			"Redis pipelines sent (each one round trip per node), by every part of the service."),
		deadLetters: f.counterVec("dead_letters_total",
			"Orders the worker gave up on and set aside, by failure reason.", "reason"),
		batchSize: f.histogram("batch_size_orders", "Orders per committed database batch.",
			[]float64{1, 2, 5, 10, 25, 50, 100, 200, 500, 1000, 2000, 5000}),
		batchSeconds: f.histogram("batch_write_duration_seconds", "Time to write and commit one database batch.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}),
		ordersWritten: f.counterVec("orders_written_total",
			"Orders newly recorded in the database, by state (created or failed); redeliveries are not counted again.",
			"state", "created", "failed"),
		claimToCommit: f.histogram("claim_to_commit_seconds",
			"Time from a claim to the commit of its order row, measured from the claim second the order ID carries (so up to 1s over).",
			[]float64{.5, 1, 2, 3, 5, 10, 30, 60, 300, 1800}),
		retries: f.counterVec("worker_retries_total",
			"Worker retries after a failure, by stage (receive from the queue, fulfil a batch).", "stage", StageReceive, StageFulfil),
		backoff: f.counterVec("worker_backoff_seconds_total",
			"Time workers spent waiting before a retry, by stage.", "stage", StageReceive, StageFulfil),
		expired: f.counter("orders_expired_total",
			"Unpaid orders this instance cancelled because their pay window passed."),
		returned: f.counter("units_returned_total",
			"Units of cancelled orders (expired or by their buyer) this instance gave back to the gate."),
		expiryLag: f.histogram("order_expiry_lag_seconds", "How long after its pay deadline each order was expired.",
			[]float64{.1, .25, .5, 1, 2, 3, 5, 10, 30, 60, 300}),
		payments: f.counterVec("payments_total",
			"Payments received, once per provider transaction, by kind: settled, late (after the order was cancelled), double (another transaction for a paid order), unsold (for a failed order); all but settled are owed back.",
			"kind", paymentKinds...),
	}
}

func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry; a collector failing does not hide the others.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            m.reg,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	})
}

// claimCtx is a claim's context counting its Redis round trips; made only when a Redis hook counts.
type claimCtx struct {
	context.Context
	roundTrips atomic.Int32
}

type claimKey struct{}

func (c *claimCtx) Value(key any) any {
	if key == (claimKey{}) {
		return c
	}
	return c.Context.Value(key)
}

func claimFrom(ctx context.Context) *claimCtx {
	c, _ := ctx.Value(claimKey{}).(*claimCtx)
	return c
}

// ClaimStarted and ClaimAnswered make Metrics the router's httpapi.ClaimObserver;
// ClaimStarted counts the claim's Redis round trips when a Redis hook is there.
func (m *Metrics) ClaimStarted(ctx context.Context) context.Context {
	if !m.instrumented.Load() {
		return ctx
	}
	return &claimCtx{Context: ctx}
}

// ClaimAnswered counts the claim's outcome (unknown codes as OutcomeError), latency and round trips.
func (m *Metrics) ClaimAnswered(ctx context.Context, code string, took time.Duration) {
	m.claims.inc(code, OutcomeError)
	m.claimSeconds.Observe(took.Seconds())
	if cc := claimFrom(ctx); cc != nil {
		m.claimRoundTrips.Observe(float64(cc.roundTrips.Load()))
	} else if m.instrumented.Load() { // answered before any Redis work (the sold-out edge)
		m.claimRoundTrips.Observe(0)
	}
}

// InstrumentRedis counts every command and pipeline rdb sends, each charged to its claim. Call it before serving.
func (m *Metrics) InstrumentRedis(rdb redis.UniversalClient) {
	m.instrumented.Store(true)
	rdb.AddHook(redisHook{m})
}

type redisHook struct{ m *Metrics }

func (redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		roundTrip(ctx, h.m.redisCommands)
		return next(ctx, cmd)
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		roundTrip(ctx, h.m.redisPipelines)
		return next(ctx, cmds)
	}
}

func roundTrip(ctx context.Context, n prometheus.Counter) {
	n.Inc()
	if c := claimFrom(ctx); c != nil {
		c.roundTrips.Add(1)
	}
}

// SoldOutAnswers exposes the claims answered from the sold-out mark (ClaimCounter.Saved).
func (m *Metrics) SoldOutAnswers(saved func() int64) {
	factory{m.reg}.counterFunc("soldout_mark_answers_total",
		"Claims answered sold out from this instance's sold-out mark, without asking Redis.", saved)
}

// SessionStats is what the session cache (redissession.Sessions) tells about itself.
type SessionStats struct {
	Entries                                   func() int
	Reports, ReadBack, Skipped, Warmed, Downs func() int64
	Serving                                   func() (listening, masters int)
}

// SessionCache exposes the tracked session cache.
func (m *Metrics) SessionCache(s SessionStats) {
	f := factory{m.reg}
	f.gaugeFunc("session_cache_entries",
		"Login tokens held in this instance's session cache (lapsed ones until they are pushed out).", s.Entries)
	f.gaugeFunc("session_cache_serving_masters",
		"Redis masters whose sessions this instance serves from memory; the others' are read from Redis on every request.",
		func() int { l, _ := s.Serving(); return l })
	f.gaugeFunc("session_cache_masters",
		"Redis masters whose sessions this instance caches.", func() int { _, n := s.Serving(); return n })
	f.counterFunc("session_cache_down_total",
		"Times a master's sessions stopped being served from memory (its subscriber's connection failed, or a report could not be read).", s.Downs)
	f.counterFunc("session_reports_total",
		"Writes to session keys Redis reported to this instance (each evicts the token).", s.Reports)
	f.counterFunc("session_read_back_total",
		"Reported sessions this instance read back and cached, so the user's next request needs no lookup.", s.ReadBack)
	f.counterFunc("session_read_back_skipped_total",
		"Reported sessions not read back (queue full, or the cache not serving); the user's next request looks the session up.", s.Skipped)
	f.counterFunc("session_warmed_total",
		"Sessions the warm-up read from Redis and cached (at start, and for a master whose subscriber came back or that took slots).", s.Warmed)
}

func (m *Metrics) ChannelQueue(length func() int) {
	factory{m.reg}.gaugeFunc("channel_queue_orders", "Orders waiting in the in-process channel for a worker.", length)
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	reg.MustRegister(c)
	return c
}

type factory struct{ reg prometheus.Registerer }

func (f factory) counter(name, help string) prometheus.Counter {
	return register(f.reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}))
}

// counterVec's series of values are there from the start, at 0.
func (f factory) counterVec(name, help, label string, values ...string) *prometheus.CounterVec {
	c := register(f.reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, []string{label}))
	for _, v := range values {
		c.WithLabelValues(v)
	}
	return c
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	return register(f.reg, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}))
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
}

func (f factory) gaugeFunc(name, help string, n func() int) {
	f.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help},
		func() float64 { return float64(n()) }))
}

func (f factory) counterFunc(name, help string, n func() int64) {
	f.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help},
		func() float64 { return float64(n()) }))
}

// stripes is n counters the claim path adds to from many cores at once: one
// shared atomic would bounce its cache line, so an add goes to one of
// stripeCells rows (a cache line apart at least) picked at random, and a read sums them.
type stripes []atomic.Int64

const stripeCells = 8

func newStripes(n int) stripes { return make(stripes, stripeCells*((n+7)/8*8+8)) }

func (s stripes) row() stripes {
	w := len(s) / stripeCells
	r := int(rand.Uint32()%stripeCells) * w
	return s[r : r+w]
}

func (s stripes) add(i int, d int64) { s.row()[i].Add(d) }

func (s stripes) cell(r, i int) *atomic.Int64 { return &s[r*(len(s)/stripeCells)+i] }

// load sums counter i's rows; a concurrent add may or may not be in it.
func (s stripes) load(i int) int64 {
	var n int64
	for r := 0; r < stripeCells; r++ {
		n += s.cell(r, i).Load()
	}
	return n
}

// stripedHistogram is a striped prometheus.Histogram: counters 0 to len(upper)
// are the buckets (+Inf last), the next one the sum's bits.
type stripedHistogram struct {
	desc  *prometheus.Desc
	upper []float64 // ascending; +Inf implied
	s     stripes
}

func newStripedHistogram(name, help string, buckets []float64) *stripedHistogram {
	return &stripedHistogram{desc: desc(name, help), upper: buckets, s: newStripes(len(buckets) + 2)}
}

// Observe counts v in the first bucket whose upper bound is at least v.
func (h *stripedHistogram) Observe(v float64) {
	r := h.s.row()
	r[sort.SearchFloat64s(h.upper, v)].Add(1)
	sum := &r[len(h.upper)+1]
	for {
		old := sum.Load()
		if sum.CompareAndSwap(old, int64(math.Float64bits(math.Float64frombits(uint64(old))+v))) {
			return
		}
	}
}

func (h *stripedHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

// Collect sums the rows; the count is the buckets' total as read, so they agree.
func (h *stripedHistogram) Collect(ch chan<- prometheus.Metric) {
	var sum float64
	for r := 0; r < stripeCells; r++ {
		sum += math.Float64frombits(uint64(h.s.cell(r, len(h.upper)+1).Load()))
	}
	cumulative := make(map[float64]uint64, len(h.upper))
	var n uint64
	for b, u := range h.upper {
		n += uint64(h.s.load(b))
		cumulative[u] = n
	}
	n += uint64(h.s.load(len(h.upper)))
	ch <- prometheus.MustNewConstHistogram(h.desc, n, sum, cumulative)
}

// outcomeCounters is a striped counter per claim outcome, exposed as one vector labelled outcome.
type outcomeCounters struct {
	desc     *prometheus.Desc
	outcomes []string
	index    map[string]int
	counts   stripes
}

func newOutcomeCounters(name, help string, outcomes []string) *outcomeCounters {
	return &outcomeCounters{desc: desc(name, help, "outcome"), outcomes: outcomes, index: indexOf(outcomes),
		counts: newStripes(len(outcomes))}
}

// inc counts one outcome; one not listed counts as other.
func (c *outcomeCounters) inc(outcome, other string) {
	i, ok := c.index[outcome]
	if !ok {
		i = c.index[other]
	}
	c.counts.add(i, 1)
}

func (c *outcomeCounters) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *outcomeCounters) Collect(ch chan<- prometheus.Metric) {
	for i, out := range c.outcomes {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.counts.load(i)), out)
	}
}

const (
	StageReceive = "receive"
	StageFulfil  = "fulfil"
)

// WorkerRetried is the worker's retry hook: it counts the retry and the backoff about to be slept.
func (m *Metrics) WorkerRetried(stage string, backoff time.Duration) {
	if stage != StageReceive {
		stage = StageFulfil // a closed label set
	}
	m.retries.WithLabelValues(stage).Inc()
	m.backoff.WithLabelValues(stage).Add(backoff.Seconds())
}

// OrderRepository counts the wrapped repository's commits: batch sizes and
// durations, orders newly written, their claim-to-commit time.
type OrderRepository struct {
	ports.OrderRepository
	m *Metrics
}

func (m *Metrics) OrderRepository(next ports.OrderRepository) *OrderRepository {
	return &OrderRepository{must(next), m}
}

func (r *OrderRepository) CreateBatch(ctx context.Context, orders []domain.VoucherOrder) ([]ports.Outcome, error) {
	start := time.Now()
	out, err := r.OrderRepository.CreateBatch(ctx, orders)
	if err != nil {
		return out, err // nothing committed; the worker's retry hook counts it
	}
	now := time.Now()
	r.m.batchSize.Observe(float64(len(orders)))
	r.m.batchSeconds.Observe(now.Sub(start).Seconds())
	r.m.written(out, now)
	return out, nil
}

func (r *OrderRepository) MarkFailed(ctx context.Context, orders []domain.VoucherOrder, reason domain.FailureReason) ([]ports.Outcome, error) {
	out, err := r.OrderRepository.MarkFailed(ctx, orders, reason)
	if err == nil {
		r.m.written(out, time.Now())
	}
	return out, err
}

func (m *Metrics) written(out []ports.Outcome, now time.Time) {
	var created, failed int
	for _, o := range out {
		if !o.New {
			continue
		}
		if o.State == domain.OrderCreated {
			created++
			m.claimToCommit.Observe(now.Sub(o.Order.ID().Time()).Seconds())
		} else {
			failed++
		}
	}
	m.ordersWritten.WithLabelValues("created").Add(float64(created))
	m.ordersWritten.WithLabelValues("failed").Add(float64(failed))
}

// must panics on a nil next: a wiring mistake, told at the start rather than at the first call.
func must[P any](next P) P {
	if any(next) == nil {
		panic("metrics: a decorator needs a non-nil " + reflect.TypeFor[P]().String())
	}
	return next
}

// OrderQueue counts the wrapped queue's dead letters by reason (not those it sets aside on its own).
type OrderQueue struct {
	ports.OrderQueue
	m *Metrics
}

func (m *Metrics) OrderQueue(next ports.OrderQueue) *OrderQueue { return &OrderQueue{must(next), m} }

func (q *OrderQueue) DeadLetter(ctx context.Context, ds []ports.Delivery, reason domain.FailureReason) error {
	err := q.OrderQueue.DeadLetter(ctx, ds, reason)
	if err == nil && len(ds) > 0 {
		q.m.deadLetters.WithLabelValues(string(reason)).Add(float64(len(ds)))
	}
	return err
}

var paymentKinds = []string{string(domain.PaymentSettled), string(domain.PaymentLate), string(domain.PaymentDouble), string(domain.PaymentUnsold)}

// OrderLifecycle counts the wrapped lifecycle's commits: orders expired and
// how late, units given back to the gate, payments by kind.
type OrderLifecycle struct {
	ports.OrderLifecycle
	m *Metrics
}

func (m *Metrics) OrderLifecycle(next ports.OrderLifecycle) *OrderLifecycle {
	return &OrderLifecycle{must(next), m}
}

func (l *OrderLifecycle) ExpireDue(ctx context.Context, now time.Time, limit int) ([]ports.ExpiredOrder, error) {
	due, err := l.OrderLifecycle.ExpireDue(ctx, now, limit)
	if err == nil {
		l.m.expired.Add(float64(len(due)))
		for _, d := range due {
			l.m.expiryLag.Observe(max(now.Sub(d.Deadline), 0).Seconds())
		}
	}
	return due, err
}

func (l *OrderLifecycle) Returned(ctx context.Context, ids []domain.OrderID) error {
	err := l.OrderLifecycle.Returned(ctx, ids)
	if err == nil {
		l.m.returned.Add(float64(len(ids)))
	}
	return err
}

func (l *OrderLifecycle) Pay(ctx context.Context, p domain.Payment) (ports.PayResult, error) {
	res, err := l.OrderLifecycle.Pay(ctx, p)
	if err == nil && res.New && slices.Contains(paymentKinds, string(res.Kind)) {
		l.m.payments.WithLabelValues(string(res.Kind)).Inc()
	}
	return res, err
}
