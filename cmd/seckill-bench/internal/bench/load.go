package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schollz/progressbar/v3"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/hmdp-go/seckill/domain"
)

// Latencies are recorded in microseconds from 1µs to a minute, to 3
// significant digits: p99.9 of a 20,000-request run is then exact to 0.1%.
const (
	histMin    = 1
	histMax    = int64(time.Minute / time.Microsecond)
	histDigits = 3
)

// requestTimeout is the client's patience; a claim's own budget is 10s, so a
// timeout here means the service stopped answering.
const requestTimeout = 30 * time.Second

// loadOutcome is what the clients saw.
type loadOutcome struct {
	planned   int
	sent      int
	elapsed   time.Duration
	started   time.Time
	latency   Latency
	successes int
	soldOut   int
	dup       int
	errors    int
	kinds     map[string]int
	// won is what each user (by workload index) was told it won.
	won map[int][]domain.OrderID
	// cpu0 is the CPU sample at the load's start, and loadGen wrk's CPU
	// (from its rusage once it exits): the run's CPU is accounted from
	// there to the end of its drain (env.settle).
	cpu0    cpuSample
	loadGen time.Duration
	// loadAvg is the machine's load average as the load began.
	loadAvg string
	// trips is how many Redis round trips the service made meanwhile, when
	// it runs in this process (-1: not counted).
	trips int64
}

type claimAnswer struct {
	Success bool   `json:"success"`
	Code    string `json:"code"`
	Data    any    `json:"data"`
}

// drive sends the workload to base as fast as Concurrency connections allow,
// with the configured generator, and measures what it cost around it.
func (e *env) drive(ctx context.Context, label string, w *workload, base string, voucher domain.VoucherID, trips *tripCounter) (*loadOutcome, error) {
	out := &loadOutcome{
		planned: len(w.seq),
		kinds:   map[string]int{},
		won:     map[int][]domain.OrderID{},
		trips:   -1,
	}
	stopProfile, err := e.startProfile(label)
	if err != nil {
		return nil, err
	}
	out.loadAvg = loadAverage()
	trips0 := trips.load()
	out.cpu0 = e.sample()
	out.started = time.Now()
	if e.opts.Load == LoadWrk {
		out.loadGen, err = e.driveWrk(ctx, label, w, base, voucher, out)
	} else {
		err = e.driveVegeta(ctx, label, w, base, voucher, out)
	}
	if trips != nil {
		out.trips = trips.load() - trips0
	}
	stopProfile()
	if err != nil {
		return out, err
	}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	return out, nil
}

// driveVegeta is the in-process generator: vegeta with an unbounded rate and
// exactly Concurrency workers is a closed loop, each worker sending its next
// request when the last one answered, like wrk -c. Responses are classified
// as they arrive.
func (e *env) driveVegeta(ctx context.Context, label string, w *workload, base string, voucher domain.VoucherID, out *loadOutcome) error {
	c := uint64(e.opts.Concurrency)
	atk := vegeta.NewAttacker(
		vegeta.Workers(c), vegeta.MaxWorkers(c),
		vegeta.Connections(int(c)), vegeta.MaxConnections(int(c)),
		vegeta.Timeout(requestTimeout), vegeta.KeepAlive(true), vegeta.Redirects(vegeta.NoFollow),
	)
	hist := hdrhistogram.New(histMin, histMax, histDigits)
	prog := newProgress(e.opts, label, len(w.seq))
	defer prog.finish()
	results := atk.Attack(w.targeter(base, voucher), vegeta.ConstantPacer{}, e.opts.MaxDuration, label)
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()
	var last time.Time
	for r := range results {
		if r.Error == vegeta.ErrNoTargets.Error() {
			continue // the targeter ran dry: nothing was sent
		}
		out.sent++
		if end := r.End(); end.After(last) {
			last = end
		}
		_ = hist.RecordValue(max(r.Latency.Microseconds(), histMin))
		out.classify(r)
		prog.add(1)
	}
	out.elapsed = time.Since(out.started)
	if !last.IsZero() {
		out.elapsed = last.Sub(out.started)
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	out.latency = Latency{
		P50:  ms(hist.ValueAtQuantile(50)),
		P90:  ms(hist.ValueAtQuantile(90)),
		P99:  ms(hist.ValueAtQuantile(99)),
		P999: ms(hist.ValueAtQuantile(99.9)),
		Max:  ms(hist.Max()),
		Mean: hist.Mean() / 1000,
	}
	return nil
}

func (o *loadOutcome) classify(r *vegeta.Result) {
	if r.Code == 0 {
		o.fail("transport: " + transportError(r.Error))
		return
	}
	var a claimAnswer
	if err := json.Unmarshal(r.Body, &a); err != nil {
		o.fail(fmt.Sprintf("http %d: undecodable body", r.Code))
		return
	}
	switch {
	case r.Code == 200 && a.Success:
		s, _ := a.Data.(string)
		id, err := strconv.ParseInt(s, 10, 64)
		u, ok := userOf(r.URL)
		if err != nil || !ok {
			o.fail("http 200: success without an order id")
			return
		}
		o.successes++
		o.won[u] = append(o.won[u], domain.OrderID(id))
	case r.Code == 200 && a.Code == "sold_out":
		o.soldOut++
	case r.Code == 200 && a.Code == "duplicate":
		o.dup++
	default:
		o.fail(fmt.Sprintf("http %d %s", r.Code, a.Code))
	}
}

func (o *loadOutcome) fail(kind string) {
	o.errors++
	o.kinds[kind]++
}

// transportError keeps the cause of a client error without the URL, so
// errors of different requests count as one kind.
func transportError(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		s = s[i+2:]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// progress shows how far a load is: a bar on a terminal, a line every few
// seconds otherwise (a CI log), nothing when there is nowhere to write.
type progress struct {
	bar   *progressbar.ProgressBar
	w     io.Writer
	label string
	total int
	done  atomic.Int64
	stop  chan struct{}
	ended chan struct{}
}

const plainEvery = 5 * time.Second

func newProgress(opts Options, label string, total int) *progress {
	p := &progress{w: opts.Progress, label: label, total: total}
	if opts.Progress == io.Discard {
		return p
	}
	if opts.ProgressBar {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(opts.Progress),
			progressbar.OptionSetDescription(fmt.Sprintf("%-14s", label)),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("req"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
			progressbar.OptionClearOnFinish(),
		)
		return p
	}
	p.stop, p.ended = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.ended)
		t := time.NewTicker(plainEvery)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				n := p.done.Load()
				fmt.Fprintf(p.w, "  %s: %d/%d requests, %.0f req/s\n", p.label, n, p.total, float64(n)/time.Since(start).Seconds())
			}
		}
	}()
	return p
}

func (p *progress) add(n int) {
	p.done.Add(int64(n))
	if p.bar != nil {
		_ = p.bar.Add(n)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
	if p.stop != nil {
		close(p.stop)
		<-p.ended
	}
}

// startProfile writes a CPU profile of the bench process for one run, when
// asked to.
func (e *env) startProfile(label string) (func(), error) {
	if e.opts.ProfileDir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(e.opts.ProfileDir, 0o755); err != nil {
		return nil, err
	}
	name := "cpu-" + strings.NewReplacer("/", "-", " ", "-", "#", "-r").Replace(label) + ".pprof"
	f, err := os.Create(e.opts.ProfileDir + "/" + name)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
