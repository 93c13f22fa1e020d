package metrics

import (
	"math"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// The claim route's instruments, striped. Every claim answer adds to its
// outcome's counter and to two histograms; client_golang's keep each in
// shared atomics, whose cache lines moved between the cores on every answer
// of a stampede (answering without them ran the hot sale 1.5% faster). These
// spread their adds over stripeCells rows and sum the rows when scraped,
// with the same names, help, labels and buckets.

// stripedHistogram is a prometheus.Histogram's Observe, striped: counters
// 0 to len(upper) are the buckets (+Inf last), the next one the sum's
// float64 bits.
type stripedHistogram struct {
	desc  *prometheus.Desc
	upper []float64 // the buckets' upper bounds, ascending; +Inf implied
	s     stripes
}

var _ prometheus.Collector = (*stripedHistogram)(nil)

func newStripedHistogram(o prometheus.HistogramOpts) *stripedHistogram {
	if !sort.Float64sAreSorted(o.Buckets) {
		panic("metrics: a striped histogram takes ascending buckets")
	}
	return &stripedHistogram{
		desc:  prometheus.NewDesc(prometheus.BuildFQName(namespace, o.Subsystem, o.Name), o.Help, nil, nil),
		upper: o.Buckets,
		s:     newStripes(len(o.Buckets) + 2),
	}
}

// Observe counts v in the first bucket whose upper bound is at least v, as
// client_golang does.
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

// Collect sums the rows. The count is the buckets' total as read, so the
// buckets and the count agree; an observation concurrent with the scrape
// may be in the sum and not in the buckets, or the other way round.
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

// outcomeCounters is a counter per claim outcome, striped, exposed as one
// counter vector labelled outcome.
type outcomeCounters struct {
	desc     *prometheus.Desc
	outcomes []string
	index    map[string]int
	counts   stripes
}

var _ prometheus.Collector = (*outcomeCounters)(nil)

func newOutcomeCounters(o prometheus.CounterOpts, outcomes []string) *outcomeCounters {
	c := &outcomeCounters{
		desc:     prometheus.NewDesc(prometheus.BuildFQName(namespace, o.Subsystem, o.Name), o.Help, []string{"outcome"}, nil),
		outcomes: outcomes,
		index:    make(map[string]int, len(outcomes)),
		counts:   newStripes(len(outcomes)),
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
	c.counts.add(i, 1)
}

func (c *outcomeCounters) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *outcomeCounters) Collect(ch chan<- prometheus.Metric) {
	for i, out := range c.outcomes {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.counts.load(i)), out)
	}
}
