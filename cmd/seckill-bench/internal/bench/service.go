package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/redissession"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
)

// run runs one mode of one scenario and never fails the bench: what went
// wrong is in the result.
func (e *env) run(ctx context.Context, sc Scenario, m Mode, round int) Result {
	r := Result{Scenario: sc, Mode: m, Round: round}
	var err error
	switch {
	case sc == ScenarioFulfil:
		err = e.runFulfil(ctx, m, &r)
	case sc == ScenarioCrash:
		err = e.runCrash(ctx, m, &r)
	case sc == ScenarioLifecycle:
		err = e.runLifecycle(ctx, m, &r)
	case sc == ScenarioExpiry:
		err = e.runExpiry(ctx, &r)
	case m == ModeSync:
		err = e.runSync(ctx, sc, &r)
	case m == ModeCeiling:
		err = e.runCeiling(ctx, sc, &r)
	case m == ModeNoop:
		err = e.runNoop(ctx, sc, &r)
	case m == ModeBare || m == ModeFullpipe:
		err = e.runReference(ctx, sc, m, &r)
	default:
		err = e.runService(ctx, sc, m, &r)
	}
	switch {
	case errors.Is(err, errUnavailable):
		r.Status, r.Reason = "unavailable", strings.TrimPrefix(err.Error(), errUnavailable.Error()+": ")
	case err != nil:
		r.Status, r.Reason = "failed", err.Error()
	default:
		r.Status = "ok"
	}
	return r
}

// sale is the size of a claim scenario.
func (e *env) sale(sc Scenario) (users, stock, maxPer int) {
	users = e.opts.Users
	if sc == ScenarioHot {
		return users, e.opts.HotStock, e.opts.MaxPerUser
	}
	return users, users, 1
}

// serviceConfig is the service's configuration for one run: the base one,
// on this run's own database, key prefix and queue, listening on a free
// loopback port.
func (e *env) serviceConfig(s *runSpace, queue string) (infra.Config, error) {
	c := e.opts.Base
	c.HTTPAddr = "127.0.0.1:0"
	c.MetricsAddr = "127.0.0.1:0"
	c.RedisURL = e.redisURL
	c.MySQLDSN = s.dsn
	c.DataDir = s.dataDir
	c.KeyPrefix = s.prefix
	c.Queue = queue
	c.Migrate = true
	c.DevEndpoints = false
	c.AdminUsers = strconv.FormatInt(int64(benchAdmin), 10)
	// The load comes from this one host but stands for many clients: every
	// user's requests carry an address of its own in X-Real-IP (see
	// userAddr), as a reverse proxy on loopback would set it, so the per-IP
	// limit runs as in production, as does the per-user one (a user sends
	// at most MaxPerUser claims).
	c.TrustedProxies = benchProxy
	// Per-request logs are debug; warnings and errors are kept for the notes.
	c.LogLevel = "warn"
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// runService runs the real service (infra.Build, in-process) with the
// mode's queue driver.
func (e *env) runService(ctx context.Context, sc Scenario, m Mode, r *Result) (err error) {
	space, err := e.newSpace(sc, m)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, space.cleanup()) }()
	cfg, err := e.serviceConfig(space, string(m))
	if err != nil {
		return err
	}
	users, stock, maxPer := e.sale(sc)
	r.Users, r.Stock = users, stock
	w := newWorkload(users, maxPer, e.opts.Seed)
	if sc == ScenarioWideJWT {
		// Its users' sessions are not in Redis: nothing to warm or read
		// back; they open the sale's page before it starts (openPages).
		key, err := useIdP(&cfg, filepath.Join(e.tmp, space.name+"-idp.pem"))
		if err != nil {
			return err
		}
		if err := w.mintJWT(key); err != nil {
			return err
		}
		cfg.TokenWarm = false
	} else if e.opts.ColdSessions {
		// Logged in before the service started: it hears none of it.
		if err := w.mint(ctx, e.rdb); err != nil {
			return err
		}
		space.tokens = w.tokens
	} else {
		// The users log in while it runs and it reads their sessions back
		// as Redis reports the logins: the warm-up at start
		// (Tuning.TokenWarm), which reads every session Redis holds,
		// has nothing of theirs to read. In a real sale it ended long
		// before; here it would still be reading earlier runs' sessions,
		// at its duty cycle, while the load runs (1% of the service's CPU
		// and most of Redis's in a hot run), or hold the sale back while
		// it does.
		cfg.TokenWarm = false
	}
	logs := &logTail{}
	app, cleanup, err := infra.Build(cfg, zerolog.New(logs).Level(zerolog.WarnLevel))
	// What Build warns of is the embedded SQLite file, which the report
	// says once for the whole bench; from here on a warning is news.
	logs.arm()
	if err != nil {
		if m == ModeStream {
			return unavailable("infra.Build: %v", err)
		}
		return fmt.Errorf("build service: %w", err)
	}
	defer cleanup()
	// A hook on the client arms the automatic pipeliner's self-deadlock
	// guard, which then reads the goroutine id (runtime.Stack) on every
	// wait: 30% of the service's CPU in a wide run. So round trips are only
	// counted without the pipeliner (on its full-duplex stream commands are
	// not round trips of their own anyway).
	var trips *tripCounter
	if cfg.RedisAutoPipeline == infra.AutoPipelineOff {
		trips = countTrips(app.Redis)
	}
	if err := app.Start(ctx); err != nil {
		return fmt.Errorf("start service: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		if serr := app.Shutdown(sctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("shutdown: %w", serr))
		}
		logs.notes(r)
	}()

	base := "http://" + app.Addr()
	vid, err := createVoucher(ctx, e.rdb, base, stock)
	if err != nil {
		return err
	}
	if sc != ScenarioWideJWT && e.opts.ColdSessions && cfg.TokenWarm {
		// Logged in before the start: the service warms its cache from
		// Redis in the background (Tuning.TokenWarm); the sale begins once
		// that is done, as an operator adding instances before a sale would
		// wait for their "session cache warmed" line.
		waited := time.Now()
		r.SessionsReadBack = waitWarmedUp(ctx, app.Sessions, w.tokens)
		r.SessionsWaitSeconds = time.Since(waited).Seconds()
		if n := r.SessionsReadBack; n >= 0 && n < len(w.tokens) {
			r.note("the service had warmed %d of %d sessions logged in before its start when the sale began; the other users' first claims looked their session up in Redis", n, len(w.tokens))
		}
	}
	if sc == ScenarioWideJWT {
		if err := w.openPages(ctx, base); err != nil {
			return err
		}
	}
	if sc != ScenarioWideJWT && !e.opts.ColdSessions {
		// The users log in while the service runs, before the sale
		// starts, as they would in the minutes before it: the service
		// reads their sessions back as Redis reports the logins.
		if err := w.mint(ctx, e.rdb); err != nil {
			return err
		}
		space.tokens = w.tokens
		waited := time.Now()
		r.SessionsReadBack = waitSessionsReadBack(ctx, app.Sessions, w.tokens)
		r.SessionsWaitSeconds = time.Since(waited).Seconds()
		if n := r.SessionsReadBack; n >= 0 && n < len(w.tokens) {
			r.note("the service had read back %d of %d logins when the sale began; the other users' first claims looked their session up in Redis", n, len(w.tokens))
		}
	}

	out, err := e.drive(ctx, e.runName(r.Scenario, r.Mode, r.Round), w, base, vid, trips)
	if err != nil {
		return err
	}
	r.fromLoad(out)
	lastAt, drained, err := waitSettled(ctx, app.DB, vid, out.successes, e.opts.DrainTimeout)
	if err != nil {
		return err
	}
	e.settle(r, out)
	b, err := check(ctx, app.DB, vid, stock, out.won)
	if err != nil {
		return err
	}
	r.Books = &b
	r.setDrain(out, lastAt, b.Created, drained)
	r.noteUndrained()
	return nil
}

// benchAdmin is the admin the bench creates vouchers as: far above any
// simulated user (users are 1..n).
const benchAdmin domain.UserID = 9_000_000_000

// createVoucher creates the run's voucher through the service's own API, as
// benchAdmin, on sale from a minute ago for an hour.
func createVoucher(ctx context.Context, rdb *redis.Client, base string, stock int) (domain.VoucherID, error) {
	token, err := redissession.New(rdb, redissession.Options{TTL: tokenTTL}).Mint(ctx, benchAdmin)
	if err != nil {
		return 0, fmt.Errorf("mint the admin's token: %w", err)
	}
	// Needed for this one request: a shared Redis keeps no bench login.
	defer rdb.Del(context.WithoutCancel(ctx), redissession.DefaultPrefix+token)
	now := time.Now().UTC()
	body, _ := json.Marshal(map[string]any{
		"shopId": 1, "title": "bench", "payValue": 100, "actualValue": 1000, "type": 1, "stock": stock,
		"beginTime": now.Add(-time.Minute).Format(time.RFC3339), "endTime": now.Add(time.Hour).Format(time.RFC3339),
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/voucher/seckill", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("create voucher: %w", err)
	}
	defer resp.Body.Close()
	var env struct {
		Success  bool   `json:"success"`
		ErrorMsg string `json:"errorMsg"`
		Data     string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || !env.Success {
		return 0, fmt.Errorf("create voucher: status %d %q (%v)", resp.StatusCode, env.ErrorMsg, err)
	}
	id, err := strconv.ParseInt(env.Data, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("create voucher: id %q: %w", env.Data, err)
	}
	return domain.VoucherID(id), nil
}

// logTail keeps the first few warnings and errors the service logged during
// a run, and counts them, so a run that logged trouble says so.
type logTail struct {
	mu    sync.Mutex
	armed bool
	n     int
	first []string
}

// arm starts keeping lines: until then they are dropped.
func (l *logTail) arm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = true
}

const logTailKeep = 5

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.armed {
		return len(p), nil
	}
	l.n++
	if len(l.first) < logTailKeep {
		l.first = append(l.first, strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func (l *logTail) notes(r *Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return
	}
	r.note("the service logged %d warnings/errors; first: %s", l.n, strings.Join(l.first, " | "))
}

// sessionsReadBackBound caps the wait for the service to read the users'
// logins back (it keeps up with the logins: 60,000 minted in pipelines of
// 1,000 were all held within about 50 ms of the last).
const sessionsReadBackBound = 30 * time.Second

// waitSessionsReadBack waits until the service's session cache has read
// back (or given up on) n logins, and tells how many of tokens it holds
// then (-1: the service has no such cache, e.g. on a Redis that cannot
// track).
// waitWarmedUp waits (bounded) for the start-up warm-up of the session
// cache and returns how many of tokens it holds, or -1 without a tracked
// cache.
func waitWarmedUp(ctx context.Context, t *redissession.Sessions, tokens []string) int {
	if !t.Tracking() {
		return -1
	}
	select {
	case <-t.WarmedUp():
	case <-time.After(sessionsReadBackBound):
	case <-ctx.Done():
	}
	return held(t, tokens)
}

func held(t *redissession.Sessions, tokens []string) int {
	n := 0
	for _, tok := range tokens {
		if t.Holds(tok) {
			n++
		}
	}
	return n
}

func waitSessionsReadBack(ctx context.Context, t *redissession.Sessions, tokens []string) int {
	if !t.Tracking() {
		return -1
	}
	deadline := time.Now().Add(sessionsReadBackBound)
	for t.Prefetched()+t.Skipped() < int64(len(tokens)) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	return held(t, tokens)
}
