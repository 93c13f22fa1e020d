package bench

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/hmdp-go/seckill/domain"
)

func TestWorkloadReplaysTheSameSale(t *testing.T) {
	a, b := newWorkload(1000, 3, 7), newWorkload(1000, 3, 7)
	if !slices.Equal(a.seq, b.seq) {
		t.Fatal("the same seed gave two different sales")
	}
	per := map[int32]int{}
	for _, u := range a.seq {
		per[u]++
	}
	if len(per) != 1000 {
		t.Fatalf("%d users sent requests, want 1000", len(per))
	}
	for u, n := range per {
		if n < 1 || n > 3 {
			t.Fatalf("user %d sends %d requests, want 1..3", u, n)
		}
	}
	if c := newWorkload(1000, 3, 8); slices.Equal(a.seq, c.seq) {
		t.Fatal("another seed gave the same sale")
	}
	if w := newWorkload(50, 1, 1); len(w.seq) != 50 {
		t.Fatalf("one request each: %d requests for 50 users", len(w.seq))
	}
}

func TestTargeterTracesEachRequestToItsUser(t *testing.T) {
	w := newWorkload(20, 2, 1)
	for i := range w.users {
		w.headers = append(w.headers, http.Header{"Authorization": {string(rune('a' + i))}})
	}
	tr := w.targeter("http://127.0.0.1:1", 9)
	for i, want := range w.seq {
		var tgt vegeta.Target
		if err := tr(&tgt); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		u, ok := userOf(tgt.URL)
		if !ok || u != int(want) {
			t.Fatalf("request %d: URL %s traces to user %d, want %d", i, tgt.URL, u, want)
		}
		if !strings.Contains(tgt.URL, "/voucher-order/seckill/9?") {
			t.Fatalf("request %d: URL %s", i, tgt.URL)
		}
		if tgt.Header.Get("Authorization") != w.headers[want].Get("Authorization") {
			t.Fatalf("request %d carries another user's token", i)
		}
	}
	var tgt vegeta.Target
	if err := tr(&tgt); err == nil {
		t.Fatal("the targeter did not run dry")
	}
}

func TestBooksWithoutADatabase(t *testing.T) {
	cases := []struct {
		name      string
		won       map[int][]domain.OrderID
		stock     int
		oversold  int
		duplicate int
	}{
		{"balanced", map[int][]domain.OrderID{0: {10}, 1: {11}}, 2, 0, 0},
		{"oversold", map[int][]domain.OrderID{0: {10}, 1: {11}, 2: {12}}, 2, 1, 0},
		{"told_twice", map[int][]domain.OrderID{0: {10, 13}}, 5, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := check(context.Background(), nil, 1, tc.stock, tc.won)
			if err != nil {
				t.Fatal(err)
			}
			if b.Oversold != tc.oversold || b.Duplicates != tc.duplicate {
				t.Fatalf("oversold %d, duplicates %d; want %d, %d", b.Oversold, b.Duplicates, tc.oversold, tc.duplicate)
			}
		})
	}
}

func TestParseLists(t *testing.T) {
	sc, err := ParseScenarios("crash, hot,hot")
	if err != nil || !slices.Equal(sc, []Scenario{ScenarioHot, ScenarioCrash}) {
		t.Fatalf("ParseScenarios = %v, %v", sc, err)
	}
	if sc, err := ParseScenarios("all"); err != nil || !slices.Equal(sc, AllScenarios) {
		t.Fatalf("all = %v, %v", sc, err)
	}
	if _, err := ParseScenarios("warm"); err == nil {
		t.Fatal("unknown scenario accepted")
	}
	ms, err := ParseModes("ceiling,sync")
	if err != nil || !slices.Equal(ms, []Mode{ModeSync, ModeCeiling}) {
		t.Fatalf("ParseModes = %v, %v", ms, err)
	}
	if _, err := ParseModes("async"); err == nil {
		t.Fatal("unknown mode accepted")
	}
}

func TestTargetsAreRatiosWithinTheRun(t *testing.T) {
	rs := []Result{
		{Scenario: ScenarioWide, Mode: ModeCeiling, Round: 1, Status: "ok", ClaimsPerSec: 1000, Latency: Latency{P99: 10}},
		{Scenario: ScenarioWide, Mode: ModeChannel, Round: 1, Status: "ok", ClaimsPerSec: 920, Latency: Latency{P99: 16}},
		{Scenario: ScenarioWide, Mode: ModeStream, Round: 1, Status: "unavailable"},
		{Scenario: ScenarioHot, Mode: ModeNoop, Round: 1, Status: "ok", ClaimsPerSec: 1000},
		{Scenario: ScenarioHot, Mode: ModeChannel, Round: 1, Status: "ok", ClaimsPerSec: 700},
		{Scenario: ScenarioHot, Mode: ModeSync, Round: 1, Status: "ok", ClaimsPerSec: 100},
	}
	byName := map[string]Target{}
	for _, tg := range checkTargets(rs, true) {
		byName[tg.Name] = tg
	}
	if m := byName["wide: channel claims/s vs ceiling"].Met; m == nil || !*m {
		t.Error("0.92× the ceiling should meet ≥ 0.9×")
	}
	if m := byName["wide: channel p99 vs ceiling p99"].Met; m == nil || *m {
		t.Error("1.6× the ceiling's p99 should miss ≤ 1.5×")
	}
	if m := byName["hot: channel claims/s vs no-op handler"].Met; m == nil || *m {
		t.Error("0.7× the no-op handler should miss ≥ 0.9×")
	}
	if tg := byName["wide: stream claims/s vs ceiling"]; tg.Met != nil || tg.measured() {
		t.Error("an unavailable mode must leave its targets unmeasured")
	}
	// 7× sync would have missed the old ≥ 20×: it is reported, not judged.
	if tg := byName["hot: channel claims/s vs sync"]; tg.Met != nil || tg.Judged || !strings.HasPrefix(tg.Got, "7.00×") {
		t.Errorf("queued vs sync must be reported without a verdict: %+v", tg)
	}
}

// Against the fixed references: wide's claims/s is judged against
// fullpipe's (≥ 0.9×), the serving process's CPU per claim too (≤ 1.1×),
// and the ratio to bare is reported without a verdict.
func TestTargetsAgainstTheFixedReferences(t *testing.T) {
	cpu := func(us float64) *CPUCost { return &CPUCost{Service: us} }
	rs := []Result{
		{Scenario: ScenarioWide, Mode: ModeFullpipe, Round: 1, Status: "ok", ClaimsPerSec: 15000, CPU: cpu(56)},
		{Scenario: ScenarioWide, Mode: ModeBare, Round: 1, Status: "ok", ClaimsPerSec: 20000, CPU: cpu(40)},
		{Scenario: ScenarioWide, Mode: ModeChannel, Round: 1, Status: "ok", ClaimsPerSec: 14000, CPU: cpu(60)},
		{Scenario: ScenarioWide, Mode: ModeStream, Round: 1, Status: "ok", ClaimsPerSec: 10500, CPU: cpu(90)},
		{Scenario: ScenarioHot, Mode: ModeNoop, Round: 1, Status: "ok", ClaimsPerSec: 1000},
		{Scenario: ScenarioHot, Mode: ModeStream, Round: 1, Status: "ok", ClaimsPerSec: 850},
	}
	byName := map[string]Target{}
	for _, tg := range checkTargets(rs, true) {
		byName[tg.Name] = tg
	}
	for name, want := range map[string]bool{
		"wide: channel claims/s vs fullpipe":            true,  // 0.93×
		"wide: stream claims/s vs fullpipe":             false, // 0.70×
		"wide: channel service CPU/claim vs fullpipe's": true,  // 1.07×
		"wide: stream service CPU/claim vs fullpipe's":  false, // 1.61×
		"hot: stream claims/s vs no-op handler":         false, // 0.85× misses 0.9×
	} {
		if m := byName[name].Met; m == nil || *m != want {
			t.Errorf("%s: met %v, want %v (%+v)", name, m, want, byName[name])
		}
	}
	if tg := byName["wide: channel claims/s vs bare"]; tg.Judged || tg.Met != nil || !strings.HasPrefix(tg.Got, "0.70×") {
		t.Errorf("channel vs bare must be reported, not judged: %+v", tg)
	}
}

// On embedded backends the speed figures are not representative: every
// ratio is reported, none is judged, and the books still are.
func TestEmbeddedRunsJudgeNoSpeed(t *testing.T) {
	rs := []Result{
		{Scenario: ScenarioWide, Mode: ModeCeiling, Round: 1, Status: "ok", ClaimsPerSec: 1000, Latency: Latency{P99: 10}},
		{Scenario: ScenarioWide, Mode: ModeChannel, Round: 1, Status: "ok", ClaimsPerSec: 100, Latency: Latency{P99: 50},
			Books: &books{Oversold: 1}},
	}
	for _, tg := range checkTargets(rs, false) {
		switch {
		case tg.Name == "books balance in every run":
			if tg.Met == nil || *tg.Met {
				t.Errorf("books: %+v, want judged and missed", tg)
			}
		case tg.Met != nil || tg.Judged:
			t.Errorf("%s judged on embedded backends: %+v", tg.Name, tg)
		}
	}
}

// With rounds, each ratio is taken within a round and the median judged:
// a drift of the machine between rounds must not pair a fast round of one
// mode with a slow round of another.
func TestTargetsTakeTheMedianOfPerRoundRatios(t *testing.T) {
	var rs []Result
	for k, pair := range [][2]float64{{1000, 400}, {2000, 1200}, {1500, 1200}} {
		rs = append(rs,
			Result{Scenario: ScenarioWide, Mode: ModeCeiling, Round: k + 1, Status: "ok", HasClaims: true, ClaimsPerSec: pair[0]},
			Result{Scenario: ScenarioWide, Mode: ModeChannel, Round: k + 1, Status: "ok", HasClaims: true, ClaimsPerSec: pair[1]})
	}
	for _, tg := range checkTargets(rs, true) {
		if tg.Name != "wide: channel claims/s vs ceiling" {
			continue
		}
		// Per round: 0.4, 0.6, 0.8; median 0.6 (the medians of each mode
		// alone would give 1200/1500 = 0.8).
		if !strings.HasPrefix(tg.Got, "median 0.60×") || tg.Met == nil || *tg.Met {
			t.Fatalf("got %q, met %v", tg.Got, tg.Met)
		}
	}
	rep := &Report{Results: rs}
	rows := rep.representative()
	if len(rows) != 2 || rows[0].Round != 3 || rows[1].Round != 2 {
		t.Fatalf("representative rounds: %+v", rows)
	}
	if len(rep.spread()) != 2 {
		t.Fatalf("spread: %q", rep.spread())
	}
}

// The median's interval is the order statistics a binomial table gives:
// x(40) and x(61) of 100, x(6) and x(15) of 20, x(2) and x(9) of 10, the
// extremes of 6, and none for 5 or fewer.
func TestMedianIntervalIsTheBinomialOrderStatistics(t *testing.T) {
	for _, c := range []struct{ n, lo, hi int }{{100, 40, 61}, {20, 6, 15}, {10, 2, 9}, {6, 1, 6}, {5, 0, 0}, {3, 0, 0}, {1, 0, 0}} {
		xs := make([]float64, c.n)
		for i := range xs {
			xs[i] = float64(c.n - i) // given unsorted: 1 is the smallest
		}
		iv, ok := medianInterval(xs, 0.95)
		if c.lo == 0 {
			if ok {
				t.Errorf("n=%d: interval %+v, want none", c.n, iv)
			}
			continue
		}
		if !ok || iv != (Interval{Low: float64(c.lo), High: float64(c.hi)}) {
			t.Errorf("n=%d: interval %+v (%v), want x(%d)–x(%d)", c.n, iv, ok, c.lo, c.hi)
		}
	}
	// Far past what exact factorials could hold.
	if _, ok := medianInterval(make([]float64, 5000), 0.95); !ok {
		t.Error("n=5000: no interval")
	}
}

// With rounds enough, a ratio's verdict says whether its limit is inside
// the median's interval: a stream/channel ratio that wanders around 0.95 is
// met or missed by the luck of the median, one far above it is not.
func TestTargetsSayWhenTheVerdictIsWithinNoise(t *testing.T) {
	judge := func(perRound []float64) Target {
		var rs []Result
		for k, x := range perRound {
			rs = append(rs,
				Result{Scenario: ScenarioWide, Mode: ModeChannel, Round: k + 1, Status: "ok", HasClaims: true, ClaimsPerSec: 10000},
				Result{Scenario: ScenarioWide, Mode: ModeStream, Round: k + 1, Status: "ok", HasClaims: true, ClaimsPerSec: 10000 * x})
		}
		for _, tg := range checkTargets(rs, true) {
			if tg.Name == "wide: stream claims/s vs channel" {
				return tg
			}
		}
		t.Fatal("no wide stream/channel target")
		return Target{}
	}
	near := judge([]float64{0.90, 0.97, 0.93, 1.01, 0.96, 0.92, 0.99, 0.945})
	if near.Met == nil || !*near.Met || !near.WithinNoise || near.Interval == nil ||
		!strings.HasPrefix(near.Got, "median 0.95× (95% interval 0.90–1.01) over 8 rounds") {
		t.Errorf("around the line: %+v", near)
	}
	far := judge([]float64{1.20, 1.10, 1.30, 1.15, 1.25, 1.05})
	if far.Met == nil || !*far.Met || far.WithinNoise || far.Interval == nil || far.Interval.Low != 1.05 {
		t.Errorf("far above the line: %+v", far)
	}
	few := judge([]float64{0.90, 0.97, 0.93})
	if few.Interval != nil || few.WithinNoise || !strings.HasPrefix(few.Got, "median 0.93× over 3 rounds") {
		t.Errorf("three rounds: %+v", few)
	}
	var out strings.Builder
	(&Report{Targets: []Target{near, far}}).WriteTable(&out)
	if !strings.Contains(out.String(), "met?    wide: stream claims/s vs channel") || strings.Count(out.String(), "met?") != 1 {
		t.Errorf("the table does not mark the verdict within noise, and only it:\n%s", out.String())
	}
}

// Every other round runs the modes in reverse, so no mode always runs first,
// or right after the same other mode's clean-up; the listed order itself is
// left alone.
func TestRoundsAlternateTheOrderOfModes(t *testing.T) {
	modes := modesOf(ScenarioWide)
	want := map[int][]Mode{1: modes, 2: {ModeNoop, ModeFullpipe, ModeBare, ModeCeiling, ModeStream, ModeChannel, ModeSync}, 3: modes}
	for round, w := range want {
		if got := roundOrder(modes, round); !slices.Equal(got, w) {
			t.Fatalf("round %d runs %v, want %v", round, got, w)
		}
	}
	if !slices.Equal(modes, ClaimModes) {
		t.Fatalf("reversing a round reordered the scenario's own list: %v", modes)
	}
}

func TestChartDrawsEveryMeasuredMode(t *testing.T) {
	rep := &Report{Results: []Result{
		{Scenario: ScenarioHot, Mode: ModeChannel, Status: "ok", HasClaims: true, ClaimsPerSec: 5000, Latency: Latency{P50: 1, P99: 5, P999: 9}},
		{Scenario: ScenarioHot, Mode: ModeCeiling, Status: "ok", HasClaims: true, ClaimsPerSec: 4000, Latency: Latency{P50: 2, P99: 4, P999: 8}},
		{Scenario: ScenarioFulfil, Mode: ModeBatched, Status: "ok", HasDrain: true, OrdersPerSec: 40000},
	}}
	dir := t.TempDir()
	if err := rep.WriteChart(dir); err != nil {
		t.Fatal(err)
	}
	charts := rep.charts()
	for name, mode := range map[string]string{"claims.svg": "ceiling", "latency.svg": "channel p99.9", "orders.svg": "batched"} {
		svg := charts[name]
		if !strings.HasPrefix(svg, "<svg") || !strings.Contains(svg, mode) {
			t.Errorf("%s: %.80q", name, svg)
		}
	}
}

// The wrk script's report is read back into the same outcome the in-process
// generator fills: counts, errors by kind, latency in ms, and every order id
// answered, each under its own user-less key.
func TestReadWrkResults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results")
	report := "summary 2000000 6 0 1 0 1 0\n" +
		"latency 1500 2000 9000 12000 15000 1800.5\n" +
		"counts 1 1 0\ncounts 1 0 1\n" +
		"kind 1 http 500 internal\n" +
		"won 101\nwon 102\n"
	if err := os.WriteFile(path, []byte(report), 0o600); err != nil {
		t.Fatal(err)
	}
	o := &loadOutcome{kinds: map[string]int{}, won: map[int][]domain.OrderID{}}
	if err := o.readWrk(path); err != nil {
		t.Fatal(err)
	}
	if o.sent != 6 || o.elapsed != 2*time.Second || o.successes != 2 || o.soldOut != 1 || o.dup != 1 {
		t.Errorf("sent %d in %v: %d successes, %d sold out, %d dup", o.sent, o.elapsed, o.successes, o.soldOut, o.dup)
	}
	// One read error from wrk, one 500 from the script.
	if o.errors != 2 || o.kinds["transport: read errors"] != 1 || o.kinds["http 500 internal"] != 1 {
		t.Errorf("errors %d: %v", o.errors, o.kinds)
	}
	if o.latency.P50 != 1.5 || o.latency.P99 != 9 || o.latency.Max != 15 {
		t.Errorf("latency %+v", o.latency)
	}
	b, err := check(context.Background(), nil, 1, 5, o.won)
	if err != nil || b.Told != 2 || b.Duplicates != 0 {
		t.Errorf("books %+v, %v", b, err)
	}
	if err := os.WriteFile(path, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (&loadOutcome{kinds: map[string]int{}, won: map[int][]domain.OrderID{}}).readWrk(path); err == nil {
		t.Error("an unreadable report was accepted")
	}
}

// A process's ticks over a window become µs per claim, and no process is
// ever busier than the machine: a reading a tick off, or a window far
// shorter than a tick (the embedded run's "busy 3666%"), is bounded by
// wall time × cores.
func TestCPUPerClaimIsBoundedByTheMachine(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := cpuSample{at: t0, self: time.Second, childPID: 42, child: 10 * time.Second, redis: 5 * time.Second, busy: 100 * time.Second}
	b := cpuSample{at: t0.Add(time.Second), self: 1100 * time.Millisecond, childPID: 42, child: 11 * time.Second,
		redis: 5600 * time.Millisecond, mysql: -time.Second, busy: 110 * time.Second}
	w := windowOf(a, b, 200*time.Millisecond, 2)
	if !w.ChildServes || w.Child != time.Second || w.MySQL != 0 || w.Busy != 2*time.Second {
		t.Fatalf("window %+v: want the child's 1 s, MySQL's negative reading at 0, busy bounded at 2 cores × 1 s", w)
	}
	c := costOf(w, 10_000, false)
	for name, got := range map[string][2]float64{
		"service (the child)": {c.Service, 100}, "bench": {c.Bench, 10}, "Redis": {c.Redis, 60}, "wrk": {c.LoadGen, 20}, "total": {c.Total, 190},
	} {
		if d := got[0] - got[1]; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: %.3f µs per claim, want %.0f", name, got[0], got[1])
		}
	}
	if c.BusyCores != 2 || c.OtherCores < 0.099 || c.OtherCores > 0.101 {
		t.Errorf("cores busy %.3f, others %.3f: want 2 (10 s read, bounded) and 2 − (1 + 0.1 + 0.6 + 0.2)", c.BusyCores, c.OtherCores)
	}

	// Ten milliseconds of wall time with three ticks of busy machine and a
	// child that read 5 s more: every figure stays within 2 cores × 10 ms.
	short := windowOf(cpuSample{at: t0, childPID: 7}, cpuSample{at: t0.Add(10 * time.Millisecond), childPID: 7, child: 5 * time.Second, busy: 30 * time.Millisecond}, 0, 2)
	sc := costOf(short, 40, false)
	if limit := float64(2*10*time.Millisecond/time.Microsecond) / 40; sc.Service > limit+1e-9 {
		t.Errorf("service %.1f µs per claim over a 10 ms window on 2 cores for 40 claims: above the machine's %.1f", sc.Service, limit)
	}
	if sc.BusyCores > 2 || sc.sharesKnown() {
		t.Errorf("a 10 ms window: %.2f cores busy, shares known %v; want at most 2 and not stated", sc.BusyCores, sc.sharesKnown())
	}
	// Another child at the second sample (the crash's restart): its CPU is
	// not a difference of one process, so the service is not measured.
	if w := windowOf(cpuSample{at: t0, childPID: 7}, cpuSample{at: t0.Add(time.Second), childPID: 8, child: time.Second}, 0, 2); w.ChildServes || w.Child != 0 {
		t.Errorf("a changed child counted: %+v", w)
	}
	// With the load generator in this process, the service's figure holds it.
	if c := costOf(windowOf(cpuSample{at: t0}, cpuSample{at: t0.Add(time.Second), self: time.Second}, 0, 2), 100, true); !c.LoadGenInService || c.Service != 10_000 {
		t.Errorf("in-process load: %+v", c)
	}
}

// /proc/<pid>/stat names the command in parentheses, which may hold spaces
// and parentheses of its own; utime and stime are the 14th and 15th fields.
func TestParseStat(t *testing.T) {
	line := "2295 (redis-server 127.0.0.1:6379) S 1 2295 2295 0 -1 4194560 1790 0 0 0 1234 566 0 0 20 0 5 0 1130 0\n"
	if got := parseStat(line, []string{"redis-server 127.0.0.1:6379"}); got != 18*time.Second {
		t.Errorf("parseStat = %v, want 18s (1800 ticks)", got)
	}
	if got := parseStat(line, []string{"mariadbd"}); got != 0 {
		t.Errorf("another command counted: %v", got)
	}
	if got := parseStat("9 (a) b) R 1 2 3 4 5 6 7 8 9 10 300 100 0", nil); got != 4*time.Second {
		t.Errorf("a command with a parenthesis: %v, want 4s", got)
	}
	if got := parseSystemBusy("cpu  100 5 50 1000 20 3 2 0 40 0"); got != 1600*time.Millisecond {
		t.Errorf("system busy = %v, want user+nice+system+irq+softirq+steal = 160 ticks", got)
	}
}

// The cost table puts every process's µs per claim beside the claims/s,
// the child's CPU as the service's when a child serves, and says how busy
// the machine's cores were only over a window long enough to tell.
func TestCostsTableShowsEveryProcess(t *testing.T) {
	rep := &Report{Results: []Result{
		{Scenario: ScenarioWide, Mode: ModeFullpipe, Round: 1, Status: "ok", HasClaims: true, Sent: 100, ClaimsPerSec: 15000,
			CPU: &CPUCost{WindowSeconds: 1.5, Requests: 100, Service: 56, Bench: 1.2, Redis: 30, MySQL: 13.5, LoadGen: 18, Total: 118.7, BusyCores: 1.83, OtherCores: 0.04, Cores: 2}},
		{Scenario: ScenarioWide, Mode: ModeCeiling, Round: 1, Status: "ok", HasClaims: true, Sent: 100, ClaimsPerSec: 14000,
			CPU: &CPUCost{WindowSeconds: 0.01, Requests: 100, Service: 40, LoadGenInService: true, Total: 40, BusyCores: 2, Cores: 2}},
	}}
	var b strings.Builder
	rep.writeCosts(&b)
	// With rounds, each figure is its own median over them.
	three := &Report{}
	for k, us := range []float64{50, 70, 60} {
		three.Results = append(three.Results, Result{Scenario: ScenarioWide, Mode: ModeStream, Round: k + 1, Status: "ok", HasClaims: true, Sent: 100,
			ClaimsPerSec: 1000 * us, CPU: &CPUCost{WindowSeconds: 1, Requests: 100, Service: us, Redis: 100 - us, Cores: 2}})
	}
	if m := three.medianCPU(three.representative()[0]); m.Service != 60 || m.Redis != 40 {
		t.Errorf("medians over rounds: service %.0f, Redis %.0f; want 60 and 40", m.Service, m.Redis)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.Split(l, " | "); len(f) > 2 {
			rows[f[1]] = l
		}
	}
	if l := rows["fullpipe"]; !strings.Contains(l, "| 15000 | 56.0 (+1.2 bench) | 30.0 | 13.5 | 18.0 | 118.7 |") || !strings.Contains(l, "| 1.83 of 2 | 0.04 |") {
		t.Errorf("fullpipe row %q", l)
	}
	if l := rows["ceiling"]; !strings.Contains(l, "| in service | 40.0 |") || !strings.Contains(l, "| "+dash+" | "+dash+" | 0.01 |") {
		t.Errorf("ceiling row %q: want the load generator in the service and no shares over 10 ms", l)
	}
}

// The crash scenario on embedded backends is unavailable for both queues,
// for one reason: the report says it once, naming both, and a note only
// some rounds of a mode carry names those rounds.
func TestNotesSayEachTextOnce(t *testing.T) {
	why := "crash needs real Redis and MySQL"
	rep := &Report{Results: []Result{
		{Scenario: ScenarioCrash, Mode: ModeChannel, Round: 1, Status: "unavailable", Reason: why},
		{Scenario: ScenarioCrash, Mode: ModeStream, Round: 1, Status: "unavailable", Reason: why},
		{Scenario: ScenarioWide, Mode: ModeBare, Round: 1, Status: "ok", Notes: []string{"slow"}},
		{Scenario: ScenarioWide, Mode: ModeBare, Round: 2, Status: "ok", CPU: &CPUCost{WindowSeconds: 2, Cores: 2, OtherCores: 0.8}},
		{Scenario: ScenarioWide, Mode: ModeNoop, Round: 2, Status: "ok", CPU: &CPUCost{WindowSeconds: 0.1, Cores: 2, OtherCores: 1.5}},
	}}
	var b strings.Builder
	rep.WriteTable(&b)
	if n := strings.Count(b.String(), why); n != 1 {
		t.Errorf("the reason is printed %d times, want once:\n%s", n, b.String())
	}
	if !strings.Contains(b.String(), "crash/channel, crash/stream: unavailable: "+why) {
		t.Errorf("the note does not name both modes:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "wide/bare#1: slow") {
		t.Errorf("a note of round 1 only does not name its round:\n%s", b.String())
	}
	// Other processes' share is summed up in one line, over the windows
	// long enough to tell (not the 0.1 s one).
	if !strings.Contains(b.String(), "1 of 5 runs had more than 10% of the machine in other processes (median 40%, up to 40%;") {
		t.Errorf("no summary of the disturbed runs:\n%s", b.String())
	}
}

// A short run costs the serving child less than a 10 ms tick of
// /proc/<pid>/stat, so its CPU is summed from its threads' schedstat in
// nanoseconds: a few milliseconds of work show, which ticks would round
// to zero or to a whole tick.
func TestThreadCPUSeesLessThanATick(t *testing.T) {
	before, self0 := cpuOfThreads(os.Getpid()), processCPU()
	for processCPU()-self0 < 3*time.Millisecond {
		for i := 0; i < 10_000; i++ {
			_ = strings.Repeat("x", i%7)
		}
	}
	spent := processCPU() - self0
	got := cpuOfThreads(os.Getpid()) - before
	if got < spent/2 || got > spent*4 {
		t.Errorf("threads' CPU grew %v while this process spent %v (rusage)", got, spent)
	}
	if got%(10*time.Millisecond) == 0 {
		t.Errorf("threads' CPU grew %v: a whole number of ticks, not read in nanoseconds", got)
	}
}
