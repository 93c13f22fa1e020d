package bench

import (
	"bufio"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Report is everything a bench run measured; --json writes it as is.
type Report struct {
	Started  time.Time      `json:"started"`
	Finished time.Time      `json:"finished"`
	Machine  Machine        `json:"machine"`
	Options  map[string]any `json:"options"`
	Warnings []string       `json:"warnings,omitempty"`
	Results  []Result       `json:"results"`
	Targets  []Target       `json:"targets"`
	// LoadAverage is the machine's at the start and the end of the bench.
	LoadAverage struct {
		Start string `json:"start"`
		End   string `json:"end"`
	} `json:"load_average"`
}

// Machine is where the numbers come from.
type Machine struct {
	Cores     int     `json:"cores"`
	MemoryGiB float64 `json:"memory_gib"`
	CPU       string  `json:"cpu"`
	OS        string  `json:"os"`
	Go        string  `json:"go"`
	Redis     string  `json:"redis"`
	MySQL     string  `json:"mysql"`
}

func describeOptions(o Options) map[string]any {
	sc := make([]string, len(o.Scenarios))
	for i, s := range o.Scenarios {
		sc[i] = string(s)
	}
	ms := make([]string, len(o.Modes))
	for i, m := range o.Modes {
		ms[i] = string(m)
	}
	return map[string]any{
		"scenarios": sc, "modes": ms, "users": o.Users, "hot_stock": o.HotStock, "max_per_user": o.MaxPerUser,
		"rounds": o.Rounds, "concurrency": o.Concurrency, "load": string(o.Load), "wrk_threads": o.WrkThreads, "max_duration": o.MaxDuration.String(), "drain_timeout": o.DrainTimeout.String(),
		"fulfil_orders": o.FulfilOrders, "fulfil_workers": o.FulfilWorkers, "crash_batch": o.CrashBatch,
		"seed": o.Seed, "batch_size": o.Base.BatchSize, "workers": o.Base.Workers, "batch_linger": o.Base.BatchLinger.String(),
		"redis_pool_size": o.Base.RedisPoolSize, "id_block": o.Base.IDBlock,
	}
}

func describeMachine(ctx context.Context, e *env) Machine {
	m := Machine{
		Cores: runtime.NumCPU(),
		OS:    runtime.GOOS + "/" + runtime.GOARCH,
		Go:    runtime.Version(),
		CPU:   procField("/proc/cpuinfo", "model name"),
	}
	if kb, err := strconv.ParseFloat(strings.Fields(procField("/proc/meminfo", "MemTotal") + " 0")[0], 64); err == nil {
		m.MemoryGiB = float64(int(kb/1024/1024*10)) / 10
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if info, err := e.rdb.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				m.Redis = "Redis " + v
			}
		}
	}
	if m.Redis == "" {
		m.Redis = "unknown"
	}
	if e.embeddedRedis {
		m.Redis = "miniredis (embedded, not representative)"
	}
	m.MySQL = "SQLite (embedded, not representative)"
	if !e.embeddedDB {
		m.MySQL = mysqlVersion(ctx, e.mysqlDSN)
	}
	return m
}

func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func mysqlVersion(ctx context.Context, dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "unknown"
	}
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "unknown"
	}
	defer db.Close()
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return "unknown"
	}
	if strings.Contains(strings.ToLower(v), "mariadb") {
		return "MariaDB " + v
	}
	return "MySQL " + v
}

// BooksBalance reports the runs whose books do not balance (oversold,
// duplicates, or lost orders outside a channel's crash). CI asserts it.
func (rep *Report) BooksBalance() []string {
	var bad []string
	for _, r := range rep.Results {
		if !r.ok() || r.Books == nil {
			continue
		}
		b := r.Books
		lost := b.Lost
		if r.Scenario == ScenarioCrash && r.Mode == ModeChannel {
			lost = 0
		}
		if b.Oversold != 0 || b.Duplicates != 0 || lost != 0 || b.Phantom != 0 || b.StockMismatch != 0 {
			bad = append(bad, fmt.Sprintf("%s#%d: oversold %d, duplicates %d, lost %d, phantom %d, stock mismatch %d",
				r.label(), r.Round, b.Oversold, b.Duplicates, lost, b.Phantom, b.StockMismatch))
		}
	}
	return bad
}

const dash = "–"

// throughput is what a run is ranked by: claims/s, or orders/s for a
// fulfilment run.
func (r *Result) throughput() float64 {
	if r.HasClaims {
		return r.ClaimsPerSec
	}
	return r.OrdersPerSec
}

// representative picks the run the table and the chart show for each
// scenario and mode: its median round by throughput (the lower middle one of
// an even count), or its first run if none ran fine.
func (rep *Report) representative() []Result {
	type key struct {
		sc Scenario
		m  Mode
	}
	var order []key
	groups := map[key][]Result{}
	for _, r := range rep.Results {
		k := key{r.Scenario, r.Mode}
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]Result, 0, len(order))
	for _, k := range order {
		var fine []Result
		for _, r := range groups[k] {
			if r.ok() {
				fine = append(fine, r)
			}
		}
		if len(fine) == 0 {
			out = append(out, groups[k][0])
			continue
		}
		slices.SortStableFunc(fine, func(a, b Result) int { return cmp.Compare(a.throughput(), b.throughput()) })
		out = append(out, fine[(len(fine)-1)/2])
	}
	return out
}

// spread lists each mode's throughput in every round, when there are several.
func (rep *Report) spread() []string {
	if rounds(rep.Results) < 2 {
		return nil
	}
	var lines []string
	for _, r := range rep.representative() {
		var xs []string
		for _, o := range rep.Results {
			if o.Scenario == r.Scenario && o.Mode == r.Mode && o.ok() {
				xs = append(xs, fmt.Sprintf("%.0f", o.throughput()))
			}
		}
		unit := "claims/s"
		if !r.HasClaims {
			unit = "orders/s"
		}
		if len(xs) > 0 {
			lines = append(lines, fmt.Sprintf("%s: %s by round %s (the table shows the median round, #%d)", r.label(), unit, strings.Join(xs, ", "), r.Round))
		}
	}
	return lines
}

// notes are the runs' notes, failures and error kinds, each text once: a
// text several modes share (crash unavailable on embedded backends, for
// both queues) names them all, and a mode's label names its rounds when the
// text holds for some of them only.
func (rep *Report) notes() []string {
	type run struct {
		label  string
		rounds []string
	}
	type noted struct {
		text string
		runs []*run
	}
	var order []*noted
	byText := map[string]*noted{}
	runs := map[string]int{}
	add := func(r Result, text string) {
		n, ok := byText[text]
		if !ok {
			n = &noted{text: text}
			byText[text] = n
			order = append(order, n)
		}
		var at *run
		for _, x := range n.runs {
			if x.label == r.label() {
				at = x
			}
		}
		if at == nil {
			at = &run{label: r.label()}
			n.runs = append(n.runs, at)
		}
		at.rounds = append(at.rounds, fmt.Sprintf("#%d", r.Round))
	}
	for _, r := range rep.Results {
		runs[r.label()]++
		if !r.ok() {
			add(r, r.Status+": "+r.Reason)
		}
		if len(r.ErrorKinds) > 0 {
			add(r, "errors: "+errorKinds(r.ErrorKinds))
		}
		for _, n := range r.Notes {
			add(r, n)
		}
	}
	var out []string
	var shares []float64
	for _, r := range rep.Results {
		if x := r.disturbed(); x > otherLoadWarn {
			shares = append(shares, x)
		}
	}
	if len(shares) > 0 {
		out = append(out, fmt.Sprintf("%d of %d runs had more than %.0f%% of the machine in other processes (median %.0f%%, up to %.0f%%; the \"others\" column): their claims/s are disturbed, their CPU per claim much less so",
			len(shares), len(rep.Results), 100*otherLoadWarn, 100*median(shares), 100*slices.Max(shares)))
	}
	for _, n := range order {
		names := make([]string, len(n.runs))
		for i, x := range n.runs {
			names[i] = x.label
			if len(x.rounds) < runs[x.label] {
				names[i] += strings.Join(x.rounds, ",")
			}
		}
		out = append(out, strings.Join(names, ", ")+": "+n.text)
	}
	return out
}

// WriteTable prints the one table, then the targets and the notes, as
// Markdown so it can be pasted into docs.
func (rep *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "\n%d cores, %.1f GiB, %s; %s; %s; %s; load from %s\n", rep.Machine.Cores, rep.Machine.MemoryGiB, rep.Machine.CPU,
		rep.Machine.Redis, rep.Machine.MySQL, rep.Machine.Go, rep.Options["load"])
	if rep.LoadAverage.Start != "" {
		fmt.Fprintf(w, "load average (1, 5, 15 min) %s at the start, %s at the end: the machine is shared, see \"others\" below\n", rep.LoadAverage.Start, rep.LoadAverage.End)
	}
	for _, warn := range rep.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", warn)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | mode | claims/s | p50 | p99 | p99.9 | max | successes | sold out | dup | errors | drain s | orders/s into MySQL | oversold | lost | duplicates |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rep.representative() {
		cells := []string{string(r.Scenario), string(r.Mode)}
		if !r.ok() {
			cells = append(cells, r.Status)
			for range 13 {
				cells = append(cells, dash)
			}
			fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
			continue
		}
		if r.HasClaims {
			cells = append(cells, fmt.Sprintf("%.0f", r.ClaimsPerSec), ms(r.Latency.P50), ms(r.Latency.P99), ms(r.Latency.P999), ms(r.Latency.Max),
				strconv.Itoa(r.Successes), strconv.Itoa(r.SoldOut), strconv.Itoa(r.Dup), strconv.Itoa(r.Errors))
		} else {
			cells = append(cells, dash, dash, dash, dash, dash, dash, dash, dash, dash)
		}
		if r.HasDrain {
			cells = append(cells, fmt.Sprintf("%.2f", r.DrainSeconds), fmt.Sprintf("%.0f", r.OrdersPerSec))
		} else {
			cells = append(cells, dash, dash)
		}
		if b := r.Books; b != nil {
			lost := dash
			if r.HasDrain {
				lost = strconv.Itoa(b.Lost)
			}
			cells = append(cells, strconv.Itoa(b.Oversold), lost, strconv.Itoa(b.Duplicates))
		} else {
			cells = append(cells, dash, dash, dash)
		}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
	}
	rep.writeCosts(w)
	// Targets this run did not measure (a mode left out, or unavailable)
	// are counted, not listed.
	var measured []Target
	for _, t := range rep.Targets {
		if t.measured() {
			measured = append(measured, t)
		}
	}
	if len(measured) > 0 {
		fmt.Fprintln(w, "\nTargets (issues 10 and 28, ratios within this run; \"info\": reported, not judged; \"?\": the limit is inside the median's 95% interval, so more rounds could turn the verdict):")
		for _, t := range measured {
			verdict := "info"
			switch {
			case t.Met != nil && *t.Met:
				verdict = "met"
			case t.Met != nil:
				verdict = "MISSED"
			}
			if t.WithinNoise {
				verdict += "?"
			}
			fmt.Fprintf(w, "  %-7s %s: want %s, got %s\n", verdict, t.Name, t.Want, t.Got)
		}
		if n := len(rep.Targets) - len(measured); n > 0 {
			fmt.Fprintf(w, "  (%d more need modes this run did not measure)\n", n)
		}
	}
	notes := rep.spread()
	notes = append(notes, rep.notes()...)
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range notes {
			fmt.Fprintln(w, "  - "+n)
		}
	}
}

// writeCosts is the second table: what each request cost each process in
// CPU over the load and its drain (the serving process, Redis, MySQL, the
// load generator), the service's Redis round trips, and how busy the
// machine's cores were, by the run's processes and by others. On a shared
// machine the CPU per claim is the robust figure: other work slows a run
// (and shows as "others"), but hardly changes what a claim costs.
func (rep *Report) writeCosts(w io.Writer) {
	header := false
	for _, r := range rep.representative() {
		if !r.ok() || r.CPU == nil || r.CPU.Requests == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nCPU per request (per order in fulfil), µs, by process, over the load and its drain (each figure the median of the rounds); cores busy (all processes / others):")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| scenario | mode | claims/s | service | Redis | MySQL | wrk | total | Redis trips | cores busy | others | window s | load avg |")
			fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
			header = true
		}
		c := rep.medianCPU(r)
		rate, trips, busy, others, gen := dash, dash, dash, dash, fmt.Sprintf("%.1f", c.LoadGen)
		if r.HasClaims {
			rate = fmt.Sprintf("%.0f", r.ClaimsPerSec)
		} else if r.HasDrain {
			rate = fmt.Sprintf("%.0f orders/s", r.OrdersPerSec)
			gen = dash
		}
		if c.LoadGenInService {
			gen = "in service"
		}
		if r.RedisTripsPerClaim > 0 {
			trips = fmt.Sprintf("%.2f", r.RedisTripsPerClaim)
		}
		if c.sharesKnown() {
			busy, others = fmt.Sprintf("%.2f of %d", c.BusyCores, c.Cores), fmt.Sprintf("%.2f", c.OtherCores)
		}
		service := fmt.Sprintf("%.1f", c.Service)
		if c.Bench >= 0.05 {
			service += fmt.Sprintf(" (+%.1f bench)", c.Bench)
		}
		load := r.LoadAverage
		if load == "" {
			load = dash
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.1f | %.1f | %s | %.1f | %s | %s | %s | %.2f | %s |\n", r.Scenario, r.Mode, rate,
			service, c.Redis, c.MySQL, gen, c.Total, trips, busy, others, c.WindowSeconds, load)
	}
}

// medianCPU is each CPU figure of r's scenario and mode, the median over
// its rounds that ran fine (claims/s is the median round's; CPU per claim
// is steadier than claims/s, and each figure's own median is steadier
// still than the one round's).
func (rep *Report) medianCPU(r Result) CPUCost {
	var cs []*CPUCost
	for i := range rep.Results {
		o := &rep.Results[i]
		if o.Scenario == r.Scenario && o.Mode == r.Mode && o.ok() && o.CPU != nil && o.CPU.Requests > 0 {
			cs = append(cs, o.CPU)
		}
	}
	if len(cs) < 2 {
		return *r.CPU
	}
	m := *r.CPU
	med := func(f func(*CPUCost) float64) float64 {
		xs := make([]float64, len(cs))
		for i, c := range cs {
			xs[i] = f(c)
		}
		return median(xs)
	}
	m.Service = med(func(c *CPUCost) float64 { return c.Service })
	m.Bench = med(func(c *CPUCost) float64 { return c.Bench })
	m.Redis = med(func(c *CPUCost) float64 { return c.Redis })
	m.MySQL = med(func(c *CPUCost) float64 { return c.MySQL })
	m.LoadGen = med(func(c *CPUCost) float64 { return c.LoadGen })
	m.Total = med(func(c *CPUCost) float64 { return c.Total })
	m.BusyCores = med(func(c *CPUCost) float64 { return c.BusyCores })
	m.OtherCores = med(func(c *CPUCost) float64 { return c.OtherCores })
	m.WindowSeconds = med(func(c *CPUCost) float64 { return c.WindowSeconds })
	return m
}

func ms(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.2f ms", v)
}

// ReadJSON reads a report WriteJSON wrote, to print its tables again.
func ReadJSON(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// WriteJSON writes the raw report.
func (rep *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
