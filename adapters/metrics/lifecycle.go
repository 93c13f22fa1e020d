package metrics

import "github.com/prometheus/client_golang/prometheus"

// Expiries counts the order lifecycle's expiry passes (issue 25): orders
// cancelled for want of payment, and units given back to the gate (theirs,
// buyers' cancellations, and returns a crash left to finish).
type Expiries struct {
	expired  prometheus.Counter
	returned prometheus.Counter
}

// NewExpiries registers the expiry counters on m's registry; call it once.
func NewExpiries(m *Metrics) *Expiries {
	f := factory{m.reg}
	return &Expiries{
		expired: f.counter(prometheus.CounterOpts{
			Name: "orders_expired_total",
			Help: "Unpaid orders this instance cancelled because their pay window passed.",
		}),
		returned: f.counter(prometheus.CounterOpts{
			Name: "units_returned_total",
			Help: "Units of cancelled orders this instance gave back to the gate.",
		}),
	}
}

// Pass adds one expiry pass's counts.
func (e *Expiries) Pass(expired, returned int) {
	e.expired.Add(float64(expired))
	e.returned.Add(float64(returned))
}
