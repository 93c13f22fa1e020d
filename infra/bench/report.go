package bench

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
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

// Target is one of the targets, checked on this run's numbers. Met
// is nil when the run did not measure what the target needs.
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  *bool  `json:"met"`
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
		"concurrency": o.Concurrency, "max_duration": o.MaxDuration.String(), "drain_timeout": o.DrainTimeout.String(),
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

// find returns the run of a mode in a scenario, if it ran fine.
func find(rs []Result, sc Scenario, m Mode) *Result {
	for i := range rs {
		if rs[i].Scenario == sc && rs[i].Mode == m && rs[i].ok() {
			return &rs[i]
		}
	}
	return nil
}

// checkTargets evaluates the targets. Each is a ratio within this
// run, because a shared 2-core machine is too noisy for absolute numbers.
func checkTargets(rs []Result) []Target {
	var ts []Target
	ratio := func(name, want string, a, b *Result, get func(*Result) float64, atLeast float64, higherIsBetter bool) {
		t := Target{Name: name, Want: want}
		if a == nil || b == nil || get(b) == 0 {
			t.Got = "not measured"
			ts = append(ts, t)
			return
		}
		x := get(a) / get(b)
		met := x >= atLeast
		if !higherIsBetter {
			met = x <= atLeast
		}
		t.Got, t.Met = fmt.Sprintf("%.2f× (%.0f vs %.0f)", x, get(a), get(b)), &met
		if get(a) < 100 || get(b) < 100 {
			t.Got = fmt.Sprintf("%.2f× (%.2f vs %.2f)", x, get(a), get(b))
		}
		ts = append(ts, t)
	}
	claims := func(r *Result) float64 { return r.ClaimsPerSec }
	p99 := func(r *Result) float64 { return r.Latency.P99 }
	orders := func(r *Result) float64 { return r.OrdersPerSec }

	wideCeil := find(rs, ScenarioWide, ModeCeiling)
	hotCeil := find(rs, ScenarioHot, ModeCeiling)
	for _, m := range []Mode{ModeChannel, ModeStream} {
		ratio(fmt.Sprintf("wide: %s claims/s vs ceiling", m), "≥ 0.5×", find(rs, ScenarioWide, m), wideCeil, claims, 0.5, true)
		ratio(fmt.Sprintf("wide: %s p99 vs ceiling p99", m), "≤ 2×", find(rs, ScenarioWide, m), wideCeil, p99, 2, false)
	}
	for _, m := range []Mode{ModeChannel, ModeStream} {
		ratio(fmt.Sprintf("hot: %s claims/s vs ceiling", m), "≥ 1.5×", find(rs, ScenarioHot, m), hotCeil, claims, 1.5, true)
	}
	for _, sc := range []Scenario{ScenarioHot, ScenarioWide} {
		ratio(fmt.Sprintf("%s: stream claims/s vs channel", sc), "≥ 0.8×", find(rs, sc, ModeStream), find(rs, sc, ModeChannel), claims, 0.8, true)
	}
	for _, m := range []Mode{ModeChannel, ModeStream} {
		ratio(fmt.Sprintf("hot: %s claims/s vs sync", m), "≥ 20×", find(rs, ScenarioHot, m), find(rs, ScenarioHot, ModeSync), claims, 20, true)
	}
	ratio("fulfil: batched orders/s vs per-order", "≥ 40×", find(rs, ScenarioFulfil, ModeBatched), find(rs, ScenarioFulfil, ModePerOrder), orders, 40, true)
	if b := find(rs, ScenarioFulfil, ModeBatched); b != nil && b.QueueAlonePerSec > 0 {
		alone := *b
		alone.OrdersPerSec = b.QueueAlonePerSec
		ratio("fulfil: channel queue alone vs batched writer", "≥ 1× (the queue is not the bottleneck)", &alone, b, orders, 1, true)
	}
	for _, m := range []Mode{ModeChannel, ModeStream} {
		if w := find(rs, ScenarioWide, m); w != nil && w.Drained {
			ratio(fmt.Sprintf("wide: %s drain vs batched writer alone", m), "informative: near 1× when the writer, not the queue, sets the pace",
				w, find(rs, ScenarioFulfil, ModeBatched), orders, 0, true)
			ts[len(ts)-1].Met = nil
		}
	}

	// The books: zero everywhere except a channel's loss under crash.
	var bad []string
	checked := 0
	for _, r := range rs {
		if !r.ok() || r.Books == nil {
			continue
		}
		checked++
		b := r.Books
		lost := b.Lost
		if r.Scenario == ScenarioCrash && r.Mode == ModeChannel {
			lost = 0
		}
		if b.Oversold != 0 || b.Duplicates != 0 || lost != 0 {
			bad = append(bad, fmt.Sprintf("%s: oversold %d, duplicates %d, lost %d", r.label(), b.Oversold, b.Duplicates, lost))
		}
	}
	t := Target{Name: "books balance in every run", Want: "0 oversold, 0 duplicates, 0 lost (channel under crash: loss reported)"}
	if checked == 0 {
		t.Got = "not measured"
	} else {
		met := len(bad) == 0
		t.Met = &met
		t.Got = fmt.Sprintf("%d runs checked", checked)
		if !met {
			t.Got += ": " + strings.Join(bad, "; ")
		}
	}
	ts = append(ts, t)
	return ts
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
			bad = append(bad, fmt.Sprintf("%s: oversold %d, duplicates %d, lost %d, phantom %d, stock mismatch %d",
				r.label(), b.Oversold, b.Duplicates, lost, b.Phantom, b.StockMismatch))
		}
	}
	return bad
}

const dash = "–"

// WriteTable prints the one table, then the targets and the notes, as
// Markdown so it can be pasted into docs.
func (rep *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "\n%d cores, %.1f GiB, %s; %s; %s; %s\n", rep.Machine.Cores, rep.Machine.MemoryGiB, rep.Machine.CPU,
		rep.Machine.Redis, rep.Machine.MySQL, rep.Machine.Go)
	for _, warn := range rep.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", warn)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | mode | claims/s | p50 | p99 | p99.9 | successes | sold out | dup | errors | drain s | orders/s into MySQL | oversold | lost | duplicates |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rep.Results {
		cells := []string{string(r.Scenario), string(r.Mode)}
		if !r.ok() {
			cells = append(cells, r.Status)
			for range 12 {
				cells = append(cells, dash)
			}
			fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
			continue
		}
		if r.HasClaims {
			cells = append(cells, fmt.Sprintf("%.0f", r.ClaimsPerSec), ms(r.Latency.P50), ms(r.Latency.P99), ms(r.Latency.P999),
				strconv.Itoa(r.Successes), strconv.Itoa(r.SoldOut), strconv.Itoa(r.Dup), strconv.Itoa(r.Errors))
		} else {
			cells = append(cells, dash, dash, dash, dash, dash, dash, dash, dash)
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
	if len(rep.Targets) > 0 {
		fmt.Fprintln(w, "\nTargets (ratios within this run):")
		for _, t := range rep.Targets {
			verdict := "n/a"
			if t.Met != nil {
				verdict = "MISSED"
				if *t.Met {
					verdict = "met"
				}
			}
			fmt.Fprintf(w, "  %-6s %s: want %s, got %s\n", verdict, t.Name, t.Want, t.Got)
		}
	}
	var notes []string
	for _, r := range rep.Results {
		if !r.ok() {
			notes = append(notes, fmt.Sprintf("%s %s: %s", r.label(), r.Status, r.Reason))
		}
		if len(r.ErrorKinds) > 0 {
			notes = append(notes, fmt.Sprintf("%s errors: %s", r.label(), errorKinds(r.ErrorKinds)))
		}
		for _, n := range r.Notes {
			notes = append(notes, r.label()+": "+n)
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range notes {
			fmt.Fprintln(w, "  - "+n)
		}
	}
}

func ms(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.2f ms", v)
}

// WriteJSON writes the raw report.
func (rep *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
