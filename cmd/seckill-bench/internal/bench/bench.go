// Package bench is `seckill-bench`: it runs the same flash sale through the
// designs people compare (the original's synchronous flow, this service with
// its channel or Redis Stream queue, and two references: a bare EVALSHA
// handler that is the machine's ceiling and a no-op handler that is HTTP
// alone), on real Redis and MySQL, over real HTTP on loopback,
// then waits until every claimed order is in MySQL, checks the books and
// reports one table, raw JSON and a chart. It is composition-level tooling:
// it wires the real service through infra, and the baselines from adapters.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/hmdp-go/seckill/infra"
)

// Scenario is one kind of sale.
type Scenario string

const (
	// ScenarioHot is a real flash sale: small stock, many users, each pressing
	// 1-3 times; almost every answer is "sold out".
	ScenarioHot Scenario = "hot"
	// ScenarioWide sells one unit to every user: every claim succeeds, which
	// stresses the queue and MySQL.
	ScenarioWide Scenario = "wide"
	// ScenarioWideJWT is wide with the users' sessions from the shop's own
	// identity provider: each user opens the sale's page before it starts
	// (its token verified then, and cached), as wide's users log in before
	// it (their sessions read back).
	ScenarioWideJWT Scenario = "wide-jwt"
	// ScenarioCrash kills the service process with SIGKILL while MySQL is
	// still filling, restarts it and counts what was lost.
	ScenarioCrash Scenario = "crash"
	// ScenarioFulfil drains the same orders into MySQL with the original's
	// per-order consumer and with this service's batched writer.
	ScenarioFulfil Scenario = "fulfil"
)

// Mode is one design under test.
type Mode string

const (
	ModeSync     Mode = "sync"      // the original's pre-optimisation flow, in MySQL per request
	ModeChannel  Mode = "channel"   // this service, in-process channel queue
	ModeStream   Mode = "stream"    // this service, Redis Stream queue
	ModeCeiling  Mode = "ceiling"   // a chi handler doing one EVALSHA of the service's claim script
	ModeBare     Mode = "bare"      // fixed: net/http plus one EVALSHA of a five-command script, in a process of its own
	ModeFullpipe Mode = "fullpipe"  // fixed: bare plus one consumer writing MySQL in batches: the whole job at its least
	ModeNoop     Mode = "noop"      // a bare net/http handler answering a constant: HTTP alone
	ModePerOrder Mode = "per-order" // fulfilment: one transaction per order (the original's consumer)
	ModeBatched  Mode = "batched"   // fulfilment: this service's batched writer
)

// AllScenarios is what "all" means, in the order they run.
var AllScenarios = []Scenario{ScenarioHot, ScenarioWide, ScenarioWideJWT, ScenarioFulfil, ScenarioCrash}

// ClaimModes are the modes the claim scenarios (hot, wide) run, in order.
var ClaimModes = []Mode{ModeSync, ModeChannel, ModeStream, ModeCeiling, ModeBare, ModeFullpipe, ModeNoop}

// allModes is every mode, in the order the table lists them.
var allModes = append([]Mode{ModeSync, ModeChannel, ModeStream, ModeCeiling, ModeBare, ModeFullpipe, ModeNoop, ModePerOrder, ModeBatched}, lifecycleModes...)

// Load is the generator that drives the claim scenarios.
type Load string

const (
	// LoadWrk runs wrk as its own process with a Lua script that gives every
	// request the next user's token: the generator's CPU is not the
	// service's, so ratios between modes are not compressed toward 1.
	LoadWrk Load = "wrk"
	// LoadInproc is vegeta inside the bench process, next to an in-process
	// service: it needs nothing installed, but costs about as much CPU per
	// request as the service does.
	LoadInproc Load = "inproc"
)

// ParseLoad reads --load; "auto" is wrk when it is on PATH, else inproc.
func ParseLoad(s string) (Load, error) {
	switch Load(s) {
	case LoadWrk, LoadInproc:
		return Load(s), nil
	case "auto":
		if _, err := exec.LookPath("wrk"); err == nil {
			return LoadWrk, nil
		}
		return LoadInproc, nil
	}
	return "", fmt.Errorf("unknown load %q (want wrk, inproc or auto)", s)
}

// Scenario defaults: the sizes the targets were first stated for.
const (
	DefaultUsers        = 20_000
	DefaultHotStock     = 1_000
	DefaultMaxPerUser   = 3
	DefaultFulfilOrders = 20_000
	DefaultConcurrency  = 100
	DefaultMaxDuration  = 2 * time.Minute
	DefaultDrainTimeout = 2 * time.Minute
	DefaultCrashBatch   = 10
	DefaultCrashSettle  = 5 * time.Second
	DefaultWrkThreads   = 2
)

// Options says what to run and where. Zero values take the defaults above.
type Options struct {
	// Base is the service configuration (SECKILL_* from the environment):
	// its Redis URL and MySQL DSN name the backends (empty: embedded, whose
	// figures are not representative), and the rest is what every run of the
	// service starts with. Each run overrides the listen address, key prefix,
	// database and queue driver.
	Base infra.Config

	Scenarios []Scenario
	// Modes filters the modes of every scenario (nil: all of them).
	Modes []Mode

	// Rounds repeats every scenario, its modes interleaved and their order
	// reversed every other round (A B C, C B A, A B C...), so that a drift
	// of the machine hits every mode alike and no mode always runs right
	// after another one's clean-up; the table shows
	// each mode's median round and the targets judge the median of the
	// per-round ratios. Default 1.
	Rounds int

	Users       int // users per claim scenario (hot, wide, crash)
	HotStock    int // stock of the hot sale
	MaxPerUser  int // in hot, each user sends 1..MaxPerUser claims
	Concurrency int // concurrent HTTP connections (wrk -c)
	// Load is the generator of the claim scenarios (default inproc, which
	// needs nothing installed); WrkThreads is wrk's -t.
	Load       Load
	WrkThreads int
	// MaxDuration caps each load phase; a capped run reports fewer requests.
	MaxDuration time.Duration
	// DrainTimeout caps the wait for claimed orders to reach MySQL.
	DrainTimeout time.Duration

	FulfilOrders  int // orders drained by each fulfilment mode
	ExpiryOrders  int // orders of the expiry sale (lifecycle.go)
	FulfilWorkers int // consumers of each fulfilment mode (0: Base.Workers)

	// CrashBatch is the service's batch size until the kill, small so the
	// drain lasts long enough to be cut; CrashSettle is how long the count
	// must stay still after the restart before a channel's loss is final.
	CrashBatch  int
	CrashSettle time.Duration
	// ReferenceBinary is the seckill-bench binary the fixed references (bare,
	// fullpipe) run in, as its hidden `reference` subcommand, each in a
	// process of its own; empty makes them unavailable.
	ReferenceBinary string
	// ServiceBinary is the seckill binary the crash scenario runs as a child
	// process (`seckill serve`); empty makes crash unavailable.
	ServiceBinary string

	Seed int64
	// ColdSessions logs the users in before the service starts, so it
	// cannot read their sessions back ahead of the sale and every user's
	// first claim looks the session up in Redis. By default they log in
	// while it runs, as before a real sale, and the load waits until the
	// service has read them back (at most 30 s).
	ColdSessions bool
	// KeepData keeps each run's database and Redis keys for inspection.
	KeepData bool

	// ProfileDir, when set, receives one CPU profile per run of the bench
	// process (load generator and in-process service together).
	ProfileDir string

	// Progress receives progress; ProgressBar draws a bar (a terminal),
	// otherwise plain lines. Log receives what the bench is doing.
	Progress    io.Writer
	ProgressBar bool
	Log         io.Writer
}

func (o *Options) defaults() {
	if len(o.Scenarios) == 0 {
		o.Scenarios = AllScenarios
	}
	if o.Rounds <= 0 {
		o.Rounds = 1
	}
	if o.Users <= 0 {
		o.Users = DefaultUsers
	}
	if o.HotStock <= 0 {
		o.HotStock = DefaultHotStock
	}
	if o.MaxPerUser <= 0 {
		o.MaxPerUser = DefaultMaxPerUser
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = DefaultMaxDuration
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.FulfilOrders <= 0 {
		o.FulfilOrders = DefaultFulfilOrders
	}
	if o.FulfilWorkers <= 0 {
		o.FulfilWorkers = max(o.Base.Workers, 1)
	}
	if o.CrashBatch <= 0 {
		o.CrashBatch = DefaultCrashBatch
	}
	if o.CrashSettle <= 0 {
		o.CrashSettle = DefaultCrashSettle
	}
	if o.Load == "" {
		o.Load = LoadInproc
	}
	if o.WrkThreads <= 0 {
		o.WrkThreads = DefaultWrkThreads
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// ParseScenarios reads a comma-separated list; "all" is every scenario.
func ParseScenarios(s string) ([]Scenario, error) {
	var out []Scenario
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch Scenario(f) {
		case "all":
			out = append(out, AllScenarios...)
		case ScenarioHot, ScenarioWide, ScenarioWideJWT, ScenarioCrash, ScenarioFulfil, ScenarioLifecycle, ScenarioExpiry:
			out = append(out, Scenario(f))
		default:
			return nil, fmt.Errorf("unknown scenario %q (want hot, wide, wide-jwt, fulfil, crash, lifecycle, expiry or all)", f)
		}
	}
	return slices.Compact(orderLike(out, append(slices.Clone(AllScenarios), lifecycleScenarios...))), nil
}

// ParseModes reads a comma-separated list; "all" is every mode.
func ParseModes(s string) ([]Mode, error) {
	all := allModes
	var out []Mode
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "all" {
			out = append(out, all...)
			continue
		}
		if !slices.Contains(all, Mode(f)) {
			return nil, fmt.Errorf("unknown mode %q (want sync, channel, stream, ceiling, bare, fullpipe, noop, per-order, batched, pay-off, pay-15m, expire or all)", f)
		}
		out = append(out, Mode(f))
	}
	return slices.Compact(orderLike(out, all)), nil
}

// orderLike sorts xs in the order they appear in ref.
func orderLike[T comparable](xs, ref []T) []T {
	slices.SortStableFunc(xs, func(a, b T) int { return slices.Index(ref, a) - slices.Index(ref, b) })
	return xs
}

func (o *Options) wants(m Mode) bool { return len(o.Modes) == 0 || slices.Contains(o.Modes, m) }

// Run runs every requested scenario and mode in turn and returns the report.
// A mode that cannot run (stream before its driver exists, crash without
// real backends) is reported as unavailable, not as a failure; a run that
// breaks is reported with its error and the others go on. Run returns an
// error only when the bench cannot start at all or ctx ends.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts.defaults()
	env, err := openEnv(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer env.close()

	rep := &Report{
		Started: time.Now().UTC(),
		Machine: describeMachine(ctx, env),
		Options: describeOptions(opts),
	}
	rep.LoadAverage.Start = loadAverage()
	if env.embeddedRedis || env.embeddedDB {
		rep.Warnings = append(rep.Warnings, "embedded backends (miniredis and/or SQLite): these figures are NOT representative and no speed target is judged; "+
			"set SECKILL_REDIS_URL and SECKILL_MYSQL_DSN to measure real servers")
	}
	for _, sc := range opts.Scenarios {
		for round := 1; round <= opts.Rounds; round++ {
			for _, m := range roundOrder(modesOf(sc), round) {
				if !opts.wants(m) {
					continue
				}
				if err := ctx.Err(); err != nil {
					return rep, err
				}
				name := env.runName(sc, m, round)
				fmt.Fprintf(opts.Log, "bench: %s\n", name)
				r := env.run(ctx, sc, m, round)
				// Why a mode is unavailable is in the notes, once.
				if r.Status != "unavailable" {
					fmt.Fprintf(opts.Log, "bench: %s: %s\n", name, r.summary())
				}
				rep.Results = append(rep.Results, r)
			}
		}
	}
	rep.Finished = time.Now().UTC()
	rep.LoadAverage.End = loadAverage()
	rep.Targets = checkTargets(rep.Results, !env.embeddedRedis && !env.embeddedDB)
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	return rep, nil
}

// runName names one run in logs, progress and profile files.
func (e *env) runName(sc Scenario, m Mode, round int) string {
	if e.opts.Rounds > 1 {
		return fmt.Sprintf("%s/%s#%d", sc, m, round)
	}
	return string(sc) + "/" + string(m)
}

// roundOrder is the order of a scenario's modes in a round: as listed in odd
// rounds, reversed in even ones.
func roundOrder(modes []Mode, round int) []Mode {
	if round%2 == 1 {
		return modes
	}
	r := slices.Clone(modes)
	slices.Reverse(r)
	return r
}

func modesOf(sc Scenario) []Mode {
	switch sc {
	case ScenarioHot, ScenarioWide:
		return ClaimModes
	case ScenarioCrash, ScenarioWideJWT:
		return []Mode{ModeChannel, ModeStream}
	case ScenarioFulfil:
		return []Mode{ModePerOrder, ModeBatched}
	}
	return lifecycleModesOf(sc)
}

// errUnavailable marks a mode that cannot run here; the result says why.
var errUnavailable = errors.New("unavailable")

func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUnavailable, fmt.Sprintf(format, args...))
}
