package bench

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

// wrkScript gives every request the next user's token and reports what each
// answer said; see its header.
//
//go:embed wrk.lua
var wrkScript []byte

// driveWrk runs wrk as a process of its own over the workload: the tokens
// file lists one "token address" line per request in the sale's order. wrk only knows
// durations, so -d is --max-duration and the script prints "drained" once a
// thread has sent its share and read every answer; when every thread has,
// SIGINT ends wrk at once. It returns wrk's CPU time.
//
// wrk does not say which request an answer belongs to, so the orders
// answered are known by id but not by user: the books still count lost,
// phantom and oversold orders, and MySQL's rows (UNIQUE per user) any user
// with two orders, but not a user told success twice whose second order
// never reached MySQL.
func (e *env) driveWrk(ctx context.Context, label string, w *workload, base string, voucher domain.VoucherID, out *loadOutcome) (time.Duration, error) {
	dir, err := os.MkdirTemp(e.tmp, "wrk-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	script, tokens, results := filepath.Join(dir, "claims.lua"), filepath.Join(dir, "tokens"), filepath.Join(dir, "results")
	if err := os.WriteFile(script, wrkScript, 0o644); err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	for _, u := range w.seq {
		buf.WriteString(w.tokens[u])
		buf.WriteByte(' ')
		buf.WriteString(userAddr(int(u)))
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(tokens, buf.Bytes(), 0o600); err != nil {
		return 0, err
	}
	threads := min(e.opts.WrkThreads, e.opts.Concurrency, max(len(w.seq), 1))
	secs := max(1, int((e.opts.MaxDuration+time.Second-1)/time.Second))
	cmd := exec.Command("wrk", "-t", strconv.Itoa(threads), "-c", strconv.Itoa(e.opts.Concurrency),
		"-d", fmt.Sprintf("%ds", secs), "--timeout", fmt.Sprintf("%ds", int(requestTimeout/time.Second)),
		"-s", script, fmt.Sprintf("%s/voucher-order/seckill/%d", base, voucher), "--", tokens, strconv.Itoa(threads))
	cmd.Env = append(os.Environ(), "SECKILL_BENCH_WRK_OUT="+results)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start wrk (install it, e.g. apt-get install wrk, or use --load inproc): %w", err)
	}
	// wrk's progress is not visible from here: say that it runs.
	fmt.Fprintf(e.opts.Progress, "  %s: wrk -t%d -c%d, %d requests\n", label, threads, e.opts.Concurrency, len(w.seq))
	interrupt := func() { _ = cmd.Process.Signal(syscall.SIGINT) }
	stop := context.AfterFunc(ctx, interrupt)
	defer stop()
	var (
		report      strings.Builder
		drained     int
		first, last time.Time
	)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		switch sc.Text() {
		case "started":
			if first.IsZero() {
				first = time.Now()
			}
		case "drained":
			last = time.Now()
			if drained++; drained == threads {
				interrupt()
			}
		default:
			report.WriteString(sc.Text() + "\n")
		}
	}
	werr := cmd.Wait()
	var cpu time.Duration
	if st := cmd.ProcessState; st != nil {
		cpu = st.UserTime() + st.SystemTime()
	}
	if werr != nil {
		return cpu, fmt.Errorf("wrk: %w: %s%s", werr, stderr.String(), report.String())
	}
	if err := out.readWrk(results); err != nil {
		return cpu, fmt.Errorf("wrk's results: %w (wrk said: %s%s)", err, stderr.String(), report.String())
	}
	// The sale lasted from the first request to the last answer; wrk's own
	// duration (kept when the run was capped) also holds its start and a
	// tick of up to 100 ms at the end, which matters in a short run.
	if drained == threads && !first.IsZero() && last.After(first) {
		out.started, out.elapsed = first, last.Sub(first)
	}
	return cpu, nil
}

// readWrk reads what the script's done() wrote.
func (o *loadOutcome) readWrk(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	anon := 0
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		var n []float64
		if kind != "kind" && kind != "won" {
			for _, f := range strings.Fields(rest) {
				x, err := strconv.ParseFloat(f, 64)
				if err != nil {
					return fmt.Errorf("line %q: %w", sc.Text(), err)
				}
				n = append(n, x)
			}
		}
		switch {
		case kind == "summary" && len(n) == 7:
			o.elapsed = time.Duration(n[0]) * time.Microsecond
			o.sent = int(n[1])
			for i, what := range []string{"connect", "read", "write"} {
				if n[2+i] > 0 {
					o.errors += int(n[2+i])
					o.kinds["transport: "+what+" errors"] += int(n[2+i])
				}
			}
			if n[6] > 0 {
				o.errors += int(n[6])
				o.kinds["transport: timeout"] += int(n[6])
			}
		case kind == "latency" && len(n) == 6:
			ms := func(us float64) float64 { return us / 1000 }
			o.latency = Latency{P50: ms(n[0]), P90: ms(n[1]), P99: ms(n[2]), P999: ms(n[3]), Max: ms(n[4]), Mean: ms(n[5])}
		case kind == "counts" && len(n) == 3:
			o.successes += int(n[0])
			o.soldOut += int(n[1])
			o.dup += int(n[2])
		case kind == "kind":
			c, k, _ := strings.Cut(rest, " ")
			x, err := strconv.Atoi(c)
			if err != nil {
				return fmt.Errorf("line %q: %w", sc.Text(), err)
			}
			o.errors += x
			o.kinds[k] += x
		case kind == "won":
			id, err := strconv.ParseInt(rest, 10, 64)
			if err != nil {
				return fmt.Errorf("line %q: %w", sc.Text(), err)
			}
			// The user is unknown (see driveWrk): each answer is its own
			// entry, keyed below zero so it names no user of the workload.
			anon--
			o.won[anon] = []domain.OrderID{domain.OrderID(id)}
		default:
			return fmt.Errorf("unexpected line %q", sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if o.elapsed == 0 {
		return errors.New("no summary")
	}
	return nil
}
