package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmdp-go/seckill/application"
)

// roomCollector exposes the waiting rooms as this instance last read them
// (application.RoomDirectory.Figures): no scrape asks Redis, and a room's
// series vanish when its sale ends.
type roomCollector struct {
	figures                              func(now time.Time) []application.RoomFigures
	waiting, admitted, used, lapsed, age *prometheus.Desc
}

// Rooms registers the waiting rooms' gauges, read from figures on scrape.
func (m *Metrics) Rooms(figures func(now time.Time) []application.RoomFigures) {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "room", name), help, []string{"voucher"}, nil)
	}
	m.reg.MustRegister(&roomCollector{
		figures:  figures,
		waiting:  desc("waiting", "Users in the sale's waiting room not admitted yet."),
		admitted: desc("admitted", "Places the sale's waiting room has admitted (passes issued)."),
		used:     desc("passes_used", "Passes used by a successful claim."),
		lapsed:   desc("passes_expired", "Admitted places whose pass expired unused; each went to the next in line."),
		age:      desc("view_age_seconds", "How old this instance's view of the room is (it reads the room at most every 250 ms, when polled)."),
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
