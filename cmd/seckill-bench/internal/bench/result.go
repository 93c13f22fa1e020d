package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Result is one mode's run of one scenario. Claims fields are set by the
// modes that take HTTP claims; drain fields by the modes that write orders.
type Result struct {
	Scenario Scenario `json:"scenario"`
	Mode     Mode     `json:"mode"`
	// Round numbers the repetitions (1..Options.Rounds); the modes of a
	// scenario run interleaved, round by round.
	Round int `json:"round"`
	// Status is "ok", "unavailable" (the mode cannot run here; Reason says
	// why) or "failed" (it broke; Reason is the error).
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`

	Users int `json:"users"`
	Stock int `json:"stock"`

	HasClaims    bool           `json:"has_claims"`
	Planned      int            `json:"requests_planned,omitempty"`
	Sent         int            `json:"requests_sent,omitempty"`
	LoadSeconds  float64        `json:"load_seconds,omitempty"`
	ClaimsPerSec float64        `json:"claims_per_sec,omitempty"`
	Latency      Latency        `json:"latency_ms"`
	Successes    int            `json:"successes"`
	SoldOut      int            `json:"sold_out"`
	Dup          int            `json:"dup"`
	Errors       int            `json:"errors"`
	ErrorKinds   map[string]int `json:"error_kinds,omitempty"`
	// CPU is what each process spent per request over the load and its
	// drain (per order in fulfil).
	CPU *CPUCost `json:"cpu,omitempty"`
	// LoadAverage is the machine's load average (1, 5, 15 minutes) as the
	// load began: the machine is shared, and this says how much.
	LoadAverage string `json:"load_average,omitempty"`
	// RedisTripsPerClaim is the service's Redis round trips during the load
	// per request (the claim path, plus a stream consumer's reads and acks),
	// when the service runs in this process.
	RedisTripsPerClaim float64 `json:"redis_trips_per_claim,omitempty"`

	// SessionsReadBack is how many of the users' logins, made while the
	// service ran, it had read back into its session cache when the load
	// began (-1: the service has no such cache; absent with ColdSessions).
	SessionsReadBack int `json:"sessions_read_back,omitempty"`
	// SessionsWaitSeconds is how long the load waited, after the last
	// login, for the service to read the sessions back.
	SessionsWaitSeconds float64 `json:"sessions_wait_seconds,omitempty"`

	HasDrain     bool    `json:"has_drain"`
	DrainSeconds float64 `json:"drain_seconds,omitempty"`
	OrdersPerSec float64 `json:"orders_per_sec,omitempty"`
	// Drained is false when the drain timeout passed first.
	Drained bool `json:"drained"`

	Books *books `json:"books,omitempty"`

	Crash *crashInfo `json:"crash,omitempty"`
	// QueueAlonePerSec is how fast the queue alone moves the orders (no
	// database), for the "queue is not the bottleneck" check.
	QueueAlonePerSec  float64 `json:"queue_alone_per_sec,omitempty"`
	StreamAlonePerSec float64 `json:"stream_alone_per_sec,omitempty"`

	Notes []string `json:"notes,omitempty"`
}

// otherLoadWarn is the share of the machine other processes may use during
// a run before the result says it was disturbed.
const otherLoadWarn = 0.10

// Latency percentiles in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func (r *Result) ok() bool { return r.Status == "ok" }

func (r *Result) label() string { return string(r.Scenario) + "/" + string(r.Mode) }

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// fromLoad records what the clients saw.
func (r *Result) fromLoad(o *loadOutcome) {
	r.HasClaims = true
	r.Planned, r.Sent = o.planned, o.sent
	r.LoadSeconds = o.elapsed.Seconds()
	if o.elapsed > 0 {
		r.ClaimsPerSec = float64(o.sent) / o.elapsed.Seconds()
	}
	r.Latency = o.latency
	r.Successes, r.SoldOut, r.Dup, r.Errors = o.successes, o.soldOut, o.dup, o.errors
	if len(o.kinds) > 0 {
		r.ErrorKinds = o.kinds
	}
	r.LoadAverage = o.loadAvg
	if o.trips >= 0 && o.sent > 0 {
		r.RedisTripsPerClaim = float64(o.trips) / float64(o.sent)
	}
	if o.sent < o.planned {
		r.note("capped by --max-duration: %d of %d requests sent", o.sent, o.planned)
	}
}

// setDrain records how the orders reached MySQL: drain is from the end of
// the load to the last order seen, the rate from the start of the load.
func (r *Result) setDrain(o *loadOutcome, lastAt time.Time, created int, drained bool) {
	r.HasDrain, r.Drained = true, drained
	end := o.started.Add(o.elapsed)
	r.DrainSeconds = max(0, lastAt.Sub(end).Seconds())
	if span := lastAt.Sub(o.started).Seconds(); span > 0 {
		r.OrdersPerSec = float64(created) / span
	}
}

// noteUndrained says a drain timed out, where that is not the measurement.
func (r *Result) noteUndrained() {
	if r.HasDrain && !r.Drained {
		r.note("not every claimed order reached MySQL within the drain timeout")
	}
}

func (r *Result) summary() string {
	if r.Status != "ok" {
		return r.Status + ": " + r.Reason
	}
	var parts []string
	if r.HasClaims {
		parts = append(parts, fmt.Sprintf("%.0f claims/s, p99 %.2f ms, %d successes", r.ClaimsPerSec, r.Latency.P99, r.Successes))
		if r.RedisTripsPerClaim > 0 {
			parts = append(parts, fmt.Sprintf("%.2f Redis trips/claim", r.RedisTripsPerClaim))
		}
	}
	if r.HasDrain {
		parts = append(parts, fmt.Sprintf("drain %.2fs, %.0f orders/s", r.DrainSeconds, r.OrdersPerSec))
	}
	return strings.Join(parts, ", ")
}

func errorKinds(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
