package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/domain"
)

// crashInfo is what the crash scenario saw around the kill.
type crashInfo struct {
	// The service ran with this batch size and one worker until the kill,
	// so the drain lasts long enough to be cut.
	Batch int `json:"batch_before_kill"`
	// Killed tells whether the drain was still running at the kill; if not,
	// the scenario did not exercise a crash (the drain was too fast).
	Killed bool `json:"killed_mid_drain"`
	// InMySQLAtKill is how many orders had settled when SIGKILL was sent.
	InMySQLAtKill int `json:"in_mysql_at_kill"`
	// RestartSeconds is from the kill until the new process was ready.
	RestartSeconds float64 `json:"restart_seconds"`
	// HeldInRedis counts lost orders whose reservation Redis still holds:
	// what `seckill reconcile` would repair.
	HeldInRedis int `json:"lost_held_in_redis"`
}

// childReady bounds a child's start (migrations included).
const childReady = 30 * time.Second

// runCrash runs `seckill serve` as a child process, claims a wide sale,
// kills the child with SIGKILL while MySQL is still filling, restarts it and
// counts what never reached MySQL.
func (e *env) runCrash(ctx context.Context, m Mode, r *Result) (err error) {
	if e.embeddedRedis || e.embeddedDB {
		return unavailable("crash needs real Redis and MySQL: a child's embedded backends would die with it")
	}
	if e.opts.ServiceBinary == "" {
		return unavailable("no seckill binary to run as a child process")
	}
	space, err := e.newSpace(ScenarioCrash, m)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, space.cleanup()) }()
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	base := "http://" + addr
	info := &crashInfo{Batch: e.opts.CrashBatch}
	r.Crash = info

	first, err := e.startChild(ctx, space, m, addr, e.opts.CrashBatch, "before")
	if err != nil {
		return err
	}
	defer first.kill()
	e.childPID.Store(int64(first.cmd.Process.Pid))
	defer e.childPID.Store(0)

	users, stock, _ := e.sale(ScenarioCrash)
	r.Users, r.Stock = users, stock
	vid, err := createVoucher(ctx, e.rdb, base, stock)
	if err != nil {
		return err
	}
	w := newWorkload(users, 1, e.opts.Seed)
	if err := w.mint(ctx, e.rdb); err != nil {
		return err
	}
	space.tokens = w.tokens
	out, err := e.drive(ctx, e.runName(r.Scenario, r.Mode, r.Round), w, base, vid, nil)
	if err != nil {
		return err
	}
	r.fromLoad(out)
	// The load alone: the kill and restart change the serving process.
	e.settle(r, out)

	db, err := mysqlstore.OpenMySQL(space.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	c, f, err := countSettled(ctx, db, vid)
	if err != nil {
		return err
	}
	info.InMySQLAtKill = c + f
	info.Killed = c+f < out.successes
	killedAt := time.Now()
	first.kill()
	if !info.Killed {
		r.note("the drain had finished before the kill: no crash was exercised (lower --crash-batch or raise --users)")
	}

	second, err := e.startChild(ctx, space, m, addr, e.opts.Base.BatchSize, "after")
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	defer second.kill()
	info.RestartSeconds = time.Since(killedAt).Seconds()

	var (
		lastAt  time.Time
		drained bool
	)
	if m == ModeStream {
		// Nothing may be lost: wait for all of it, up to the drain timeout.
		lastAt, drained, err = waitSettled(ctx, db, vid, out.successes, e.opts.DrainTimeout)
	} else {
		// A channel loses what it held: wait until the count stops moving.
		lastAt, drained, err = waitStill(ctx, db, vid, out.successes, e.opts.CrashSettle, e.opts.DrainTimeout)
	}
	if err != nil {
		return err
	}
	if serr := second.stop(); serr != nil {
		r.note("stopping the restarted service: %v", serr)
	}
	b, err := check(ctx, db, vid, stock, out.won)
	if err != nil {
		return err
	}
	r.Books = &b
	r.setDrain(out, lastAt, b.Created, drained)
	if m == ModeStream {
		// A channel's loss is the measurement; a stream's is a failure.
		r.noteUndrained()
	}
	if b.Lost > 0 {
		held, err := heldInRedis(ctx, db, e, space.prefix, vid)
		if err != nil {
			return err
		}
		info.HeldInRedis = held
		r.note("%d orders lost with the killed process; Redis still holds %d of their reservations (reconcile repairs them)", b.Lost, held)
	}
	return nil
}

// waitStill waits until the settled count reaches want, or has not moved
// for still, or timeout passes.
func waitStill(ctx context.Context, db bun.IDB, voucher domain.VoucherID, want int, still, timeout time.Duration) (time.Time, bool, error) {
	deadline := time.Now().Add(timeout)
	last, lastAt := -1, time.Now()
	for {
		c, f, err := countSettled(ctx, db, voucher)
		if err != nil {
			return time.Time{}, false, err
		}
		now := time.Now()
		if c+f >= want {
			return now, true, nil
		}
		if c+f != last {
			last, lastAt = c+f, now
		}
		if now.Sub(lastAt) >= still || now.After(deadline) {
			return lastAt, false, nil
		}
		select {
		case <-ctx.Done():
			return now, false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// heldInRedis counts the gate's buyers whose order is not in MySQL.
func heldInRedis(ctx context.Context, db bun.IDB, e *env, prefix string, voucher domain.VoucherID) (int, error) {
	var ids []int64
	if err := db.NewSelect().Table("tb_voucher_order").Column("id").Where("voucher_id = ?", int64(voucher)).Scan(ctx, &ids); err != nil {
		return 0, err
	}
	in := make(map[domain.OrderID]bool, len(ids))
	for _, id := range ids {
		in[domain.OrderID(id)] = true
	}
	buyers, err := redisgate.New(e.rdb, redisgate.Options{Prefix: prefix}).Buyers(ctx, voucher)
	if err != nil {
		return 0, err
	}
	n := 0
	for id := range buyers {
		if !in[id] {
			n++
		}
	}
	return n, nil
}

// child is one `seckill serve` process.
type child struct {
	cmd  *exec.Cmd
	done chan error
	log  string
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startChild runs the service binary with its configuration in the
// environment, as an operator would, and waits until it is ready. Its tuning
// is the binary's own (infra.DefaultTuning), as Base's is: the bench reads
// only the operator's settings from the environment.
func (e *env) startChild(ctx context.Context, s *runSpace, m Mode, addr string, batch int, tag string) (*child, error) {
	c := e.opts.Base
	vars := map[string]string{
		"SECKILL_HTTP_ADDR":        addr,
		"SECKILL_REDIS_URL":        e.redisURL,
		"SECKILL_MYSQL_DSN":        s.dsn,
		"SECKILL_KEY_PREFIX":       s.prefix,
		"SECKILL_QUEUE":            string(m),
		"SECKILL_BATCH_SIZE":       strconv.Itoa(batch),
		"SECKILL_SHUTDOWN_TIMEOUT": c.ShutdownTimeout.String(),
		"SECKILL_LOG_LEVEL":        "warn",
		"SECKILL_LOG_FORMAT":       "json",
		// Not the default 127.0.0.1:9090: anything else on the machine
		// holding it would stop the child at start.
		"SECKILL_METRICS_ADDR":    "127.0.0.1:0",
		"SECKILL_ADMIN_USERS":     strconv.FormatInt(int64(benchAdmin), 10),
		"SECKILL_RATE_USER":       strconv.Itoa(c.RateUser),
		"SECKILL_RATE_IP":         strconv.Itoa(c.RateIP),
		"SECKILL_TRUSTED_PROXIES": benchProxy, // as in serviceConfig
	}
	env := make([]string, 0, len(os.Environ())+len(vars))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECKILL_") {
			env = append(env, kv)
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	logPath := filepath.Join(e.tmp, fmt.Sprintf("crash-%s-%s-%s.log", m, s.name, tag))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(e.opts.ServiceBinary, "serve")
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s serve: %w", e.opts.ServiceBinary, err)
	}
	ch := &child{cmd: cmd, done: make(chan error, 1), log: logPath}
	go func() {
		ch.done <- cmd.Wait()
		_ = logFile.Close()
		close(ch.done)
	}()

	deadline := time.Now().Add(childReady)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case err := <-ch.done:
			tail := ch.tail()
			if m == ModeStream && strings.Contains(tail, "not available") {
				return nil, unavailable("the service binary refuses SECKILL_QUEUE=stream: %s", tail)
			}
			return nil, fmt.Errorf("service exited before it was ready (%v): %s", err, tail)
		case <-ctx.Done():
			ch.kill()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return ch, nil
			}
		}
		if time.Now().After(deadline) {
			ch.kill()
			return nil, fmt.Errorf("service not ready within %s: %s", childReady, ch.tail())
		}
	}
}

// kill is SIGKILL: no graceful shutdown, no drain. It is idempotent.
func (c *child) kill() {
	if c == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// stop is a graceful SIGTERM, with SIGKILL after the shutdown had its time.
func (c *child) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err, ok := <-c.done:
		if ok && err != nil {
			return fmt.Errorf("%v: %s", err, c.tail())
		}
		return nil
	case <-time.After(30 * time.Second):
		c.kill()
		return errors.New("did not stop within 30s of SIGTERM; killed")
	}
}

// tail is the end of the child's log, for error messages.
func (c *child) tail() string {
	b, _ := os.ReadFile(c.log)
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}
