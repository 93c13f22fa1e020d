package metrics

import (
	"math"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func gatherOne(t *testing.T, c prometheus.Collector) []*dto.Metric {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil || len(fams) != 1 {
		t.Fatalf("gather: %d families, %v", len(fams), err)
	}
	return fams[0].GetMetric()
}

// TestStripedHistogramExposesWhatClientGolangWould: the same observations,
// from many goroutines, give the same count, sum and cumulative buckets as
// a prometheus.Histogram with the same buckets, bounds and outliers
// included.
func TestStripedHistogramExposesWhatClientGolangWould(t *testing.T) {
	opts := prometheus.HistogramOpts{Namespace: namespace, Name: "x", Help: "x", Buckets: claimBuckets}
	ours, theirs := newStripedHistogram(opts.Name, opts.Help, opts.Buckets), prometheus.NewHistogram(opts)
	values := []float64{0, -1, .0001, .00011, .001, .0049, .005, 1, 1.5, 1e9}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				v := values[(g+i)%len(values)]
				ours.Observe(v)
				theirs.Observe(v)
			}
		}()
	}
	wg.Wait()
	got, want := gatherOne(t, ours)[0].GetHistogram(), gatherOne(t, theirs)[0].GetHistogram()
	if got.GetSampleCount() != want.GetSampleCount() || math.Abs(got.GetSampleSum()-want.GetSampleSum()) > 1e-6*math.Abs(want.GetSampleSum()) {
		t.Fatalf("count %d sum %v, client_golang %d %v", got.GetSampleCount(), got.GetSampleSum(), want.GetSampleCount(), want.GetSampleSum())
	}
	gb, wb := got.GetBucket(), want.GetBucket()
	if len(gb) != len(wb) {
		t.Fatalf("%d buckets, client_golang %d", len(gb), len(wb))
	}
	for i := range wb {
		if gb[i].GetUpperBound() != wb[i].GetUpperBound() || gb[i].GetCumulativeCount() != wb[i].GetCumulativeCount() {
			t.Fatalf("bucket %d: le=%v %d, client_golang le=%v %d", i, gb[i].GetUpperBound(), gb[i].GetCumulativeCount(), wb[i].GetUpperBound(), wb[i].GetCumulativeCount())
		}
	}
}

// TestOutcomeCountersCountEveryAnswer: concurrent answers are all counted
// under their outcome, an unknown code under the fallback, and every
// outcome is exposed from the start.
func TestOutcomeCountersCountEveryAnswer(t *testing.T) {
	c := newOutcomeCounters("claims_total", "x", []string{"success", "sold_out", OutcomeError})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				c.inc("sold_out", OutcomeError)
				c.inc("made_up", OutcomeError)
			}
		}()
	}
	wg.Wait()
	got := map[string]float64{}
	for _, m := range gatherOne(t, c) {
		got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	want := map[string]float64{"success": 0, "sold_out": 2000, OutcomeError: 2000}
	if len(got) != len(want) {
		t.Fatalf("exposed %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("exposed %v, want %v", got, want)
		}
	}
}

// An answer's instruments allocate nothing.
func TestStripedInstrumentsAllocateNothing(t *testing.T) {
	h := newStripedHistogram("x", "x", claimBuckets)
	c := newOutcomeCounters("y", "y", []string{"a", OutcomeError})
	if n := testing.AllocsPerRun(100, func() { h.Observe(.003); c.inc("a", OutcomeError) }); n != 0 {
		t.Fatalf("an observation allocated %.0f times", n)
	}
}
