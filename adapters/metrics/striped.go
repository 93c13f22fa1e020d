package metrics

import (
	"math"
	"sort"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The claim route's instruments, striped. Every claim answer adds to its
// outcome's counter and to two histograms; client_golang's keep each in
// shared atomics, whose cache lines moved between the cores on every answer
// of a stampede (answering without them ran the hot sale 1.5% faster). These
// spread their adds over stripeCells rows and sum the rows when scraped,
// with the same names, help, labels and buckets.

// maxBuckets bounds a striped histogram's buckets (+Inf included).
const maxBuckets = 16

// stripedHistogram is a prometheus.Histogram's Observe, striped.
type stripedHistogram struct {
	desc  *prometheus.Desc
	upper []float64 // the buckets' upper bounds, ascending; +Inf implied
	rows  [stripeCells]histRow
}

type histRow struct {
	_       [64]byte // no two rows' counts on one cache line
	buckets [maxBuckets]atomic.Uint64
	sum     atomic.Uint64 // float64 bits
}

var _ prometheus.Collector = (*stripedHistogram)(nil)

func newStripedHistogram(o prometheus.HistogramOpts) *stripedHistogram {
	if len(o.Buckets)+1 > maxBuckets || !sort.Float64sAreSorted(o.Buckets) {
		panic("metrics: a striped histogram takes at most 15 ascending buckets")
	}
	return &stripedHistogram{
		desc:  prometheus.NewDesc(prometheus.BuildFQName(namespace, o.Subsystem, o.Name), o.Help, nil, nil),
		upper: o.Buckets,
	}
}

// Observe counts v in the first bucket whose upper bound is at least v, as
// client_golang does.
func (h *stripedHistogram) Observe(v float64) {
	r := &h.rows[pickCell()]
	r.buckets[sort.SearchFloat64s(h.upper, v)].Add(1)
	for {
		old := r.sum.Load()
		if r.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (h *stripedHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

// Collect sums the rows. The count is the buckets' total as read, so the
// buckets and the count agree; an observation concurrent with the scrape
// may be in the sum and not in the buckets, or the other way round.
func (h *stripedHistogram) Collect(ch chan<- prometheus.Metric) {
	var counts [maxBuckets]uint64
	var sum float64
	for i := range h.rows {
		r := &h.rows[i]
		for b := 0; b <= len(h.upper); b++ {
			counts[b] += r.buckets[b].Load()
		}
		sum += math.Float64frombits(r.sum.Load())
	}
	cumulative := make(map[float64]uint64, len(h.upper))
	var n uint64
	for b, u := range h.upper {
		n += counts[b]
		cumulative[u] = n
	}
	n += counts[len(h.upper)]
	ch <- prometheus.MustNewConstHistogram(h.desc, n, sum, cumulative)
}

// outcomeCounters is a counter per claim outcome, striped, exposed as one
// counter vector labelled outcome.
type outcomeCounters struct {
	desc     *prometheus.Desc
	outcomes []string
	index    map[string]int
	counts   []stripedCounter
}

var _ prometheus.Collector = (*outcomeCounters)(nil)

func newOutcomeCounters(o prometheus.CounterOpts, outcomes []string) *outcomeCounters {
	c := &outcomeCounters{
		desc:     prometheus.NewDesc(prometheus.BuildFQName(namespace, o.Subsystem, o.Name), o.Help, []string{"outcome"}, nil),
		outcomes: outcomes,
		index:    make(map[string]int, len(outcomes)),
		counts:   make([]stripedCounter, len(outcomes)),
	}
	for i, out := range outcomes {
		c.index[out] = i
	}
	return c
}

// inc counts one answer of outcome; an outcome not listed counts as other.
func (c *outcomeCounters) inc(outcome, other string) {
	i, ok := c.index[outcome]
	if !ok {
		i = c.index[other]
	}
	c.counts[i].Add(1)
}

func (c *outcomeCounters) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *outcomeCounters) Collect(ch chan<- prometheus.Metric) {
	for i, out := range c.outcomes {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.counts[i].Load()), out)
	}
}
