package bench_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/hmdp-go/seckill/cmd/seckill-bench/internal/bench"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestMain lets the test binary stand in for seckill-bench: the bench runs
// the fixed references as its own binary's `reference` subcommand.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == bench.ReferenceCommand {
		os.Exit(bench.ReferenceMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// tiny is a sale small enough for CI: seconds, not minutes. Its speed is
// never asserted; its books are.
func tiny(t *testing.T, base infra.Config, binary string) bench.Options {
	return bench.Options{
		ReferenceBinary: testBinary(t),
		Base:            base,
		Scenarios:       bench.AllScenarios,
		Users:           120,
		HotStock:        10,
		MaxPerUser:      3,
		Concurrency:     8,
		MaxDuration:     30 * time.Second,
		DrainTimeout:    30 * time.Second,
		FulfilOrders:    300,
		CrashBatch:      1,
		CrashSettle:     2 * time.Second,
		ServiceBinary:   binary,
	}
}

// buildService builds the seckill binary the crash scenario runs as a child.
func buildService(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "seckill")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/hmdp-go/seckill/cmd/seckill")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the service: %v\n%s", err, out)
	}
	return bin
}

// TestSmokeBooksBalanceInEveryMode runs every scenario and mode, tiny, on
// the real Redis and MySQL, and fails when a run breaks or its books do not
// balance: nothing oversold, no user with two orders, no answered success
// missing from MySQL (except a channel's loss under crash, which is the
// measurement).
func TestSmokeBooksBalanceInEveryMode(t *testing.T) {
	testenv.RealRedis(t)
	base := infra.DefaultConfig()
	base.RedisURL = os.Getenv(testenv.RedisEnv)
	// The DSN names a database: every run writes there and nowhere else
	// on the server, and leaves it as empty as it found it.
	base.MySQLDSN = testenv.MySQLDSN(t)
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	before := benchDatabases(t, base.MySQLDSN)
	opts := tiny(t, base, buildService(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if after := benchDatabases(t, base.MySQLDSN); after != before {
		t.Errorf("databases seckill_bench_* on the server: %q before, %q after; want none made when the DSN names one", before, after)
	}
	if tables := tablesOf(t, base.MySQLDSN); tables != "" {
		t.Errorf("the DSN's database holds %s after the bench; want it left empty", tables)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	t.Log(table.String())
	assertBooks(t, rep, opts)

	want := map[string]bool{}
	for _, sc := range bench.AllScenarios {
		for _, m := range []bench.Mode{bench.ModeSync, bench.ModeChannel, bench.ModeStream, bench.ModeCeiling, bench.ModeBare, bench.ModeFullpipe, bench.ModeNoop, bench.ModePerOrder, bench.ModeBatched} {
			want[string(sc)+"/"+string(m)] = false
		}
	}
	for _, r := range rep.Results {
		want[string(r.Scenario)+"/"+string(r.Mode)] = true
		// The users log in while the service runs, and the load waits
		// until it has read every session back (the real Redis tracks).
		if (r.Scenario == bench.ScenarioHot || r.Scenario == bench.ScenarioWide) &&
			(r.Mode == bench.ModeChannel || r.Mode == bench.ModeStream) && r.SessionsReadBack != r.Users {
			t.Errorf("%s/%s: the service held %d of %d users' sessions when the load began", r.Scenario, r.Mode, r.SessionsReadBack, r.Users)
		}
	}
	for _, name := range []string{"hot/sync", "hot/channel", "hot/stream", "hot/ceiling", "hot/bare", "hot/fullpipe", "hot/noop", "wide/sync", "wide/channel",
		"wide/stream", "wide/ceiling", "wide/bare", "wide/fullpipe", "wide/noop", "wide-jwt/channel", "wide-jwt/stream", "fulfil/per-order", "fulfil/batched", "crash/channel", "crash/stream"} {
		if !want[name] {
			t.Errorf("%s did not run", name)
		}
	}
}

// TestSmokeEmbedded runs the claim scenarios on the embedded backends, as
// `seckill-bench` does with nothing configured, so the bench itself is
// tested wherever the tests run. Crash needs real servers and says so.
func TestSmokeEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	base := infra.DefaultConfig()
	base.DataDir = t.TempDir()
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	opts := tiny(t, base, "")
	opts.Users, opts.FulfilOrders = 40, 60
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Warnings) == 0 || !strings.Contains(rep.Warnings[0], "NOT representative") {
		t.Errorf("an embedded run must say its figures are not representative; warnings: %q", rep.Warnings)
	}
	for _, tg := range rep.Targets {
		if tg.Met != nil && tg.Name != "books balance in every run" {
			t.Errorf("an embedded run judged %q", tg.Name)
		}
	}
	for _, r := range rep.Results {
		for _, n := range r.Notes {
			if strings.Contains(n, "SQLite") {
				t.Errorf("%s/%s repeats the embedded warning: %s", r.Scenario, r.Mode, n)
			}
		}
	}
	assertBooks(t, rep, opts)
	for _, r := range rep.Results {
		if r.Scenario == bench.ScenarioCrash && r.Status != "unavailable" {
			t.Errorf("crash on embedded backends: status %s, want unavailable", r.Status)
		}
	}
}

// embeddedReference: a fixed reference on embedded backends, which it
// cannot run on.
func embeddedReference(r bench.Result, opts bench.Options) bool {
	if r.Mode != bench.ModeBare && r.Mode != bench.ModeFullpipe {
		return false
	}
	return opts.Base.RedisURL == "" || (r.Mode == bench.ModeFullpipe && opts.Base.MySQLDSN == "")
}

func assertBooks(t *testing.T, rep *bench.Report, opts bench.Options) {
	t.Helper()
	for _, r := range rep.Results {
		name := string(r.Scenario) + "/" + string(r.Mode)
		switch {
		case r.Status == "unavailable" && (r.Mode == bench.ModeStream || r.Scenario == bench.ScenarioCrash || embeddedReference(r, opts)):
			// The stream driver may not be wired yet; crash needs real
			// servers and a binary; the fixed references real servers.
			// Each says why.
			t.Logf("%s unavailable: %s", name, r.Reason)
			continue
		case r.Status != "ok":
			t.Errorf("%s %s: %s", name, r.Status, r.Reason)
			continue
		}
		if r.Books == nil {
			t.Errorf("%s: no books", name)
			continue
		}
		if r.HasClaims {
			if r.Errors != 0 {
				t.Errorf("%s: %d errors: %v", name, r.Errors, r.ErrorKinds)
			}
			if r.Sent != r.Planned {
				t.Errorf("%s: %d of %d requests sent", name, r.Sent, r.Planned)
			}
			if got := r.Successes + r.SoldOut + r.Dup + r.Errors; got != r.Sent {
				t.Errorf("%s: %d answers classified for %d requests", name, got, r.Sent)
			}
			// Every unit sells: the stock is far below the demand in hot,
			// equal to it elsewhere. The no-op handler sells nothing.
			want := r.Stock
			if r.Mode == bench.ModeNoop {
				want = 0
			}
			if r.Successes != want {
				t.Errorf("%s: %d successes, want %d", name, r.Successes, want)
			}
		}
		if r.HasDrain && r.Books.Created+r.Books.Lost != r.Books.Told && r.Scenario != bench.ScenarioFulfil {
			t.Errorf("%s: %d created + %d lost != %d told", name, r.Books.Created, r.Books.Lost, r.Books.Told)
		}
		if r.Scenario == bench.ScenarioFulfil && r.Books.Created != opts.FulfilOrders {
			t.Errorf("%s: %d orders created, want %d", name, r.Books.Created, opts.FulfilOrders)
		}
	}
	if bad := rep.BooksBalance(); len(bad) > 0 {
		t.Errorf("the books do not balance: %s", strings.Join(bad, "; "))
	}
}

// TestSmokeWrk drives the claim scenarios with wrk, as `make bench-designs`
// does where it is installed: every request must be sent once with its own
// token (wrk's share per thread adds up to the sale) and the books balance.
// It runs on the real servers when they are configured, else embedded. CI
// installs wrk, so there a missing wrk fails instead of skipping.
func TestSmokeWrk(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("wrk is not on PATH; CI requires it (apt-get install -y wrk)")
		}
		t.Skip("wrk is not on PATH")
	}
	base := infra.DefaultConfig()
	base.DataDir = t.TempDir()
	base.RedisURL = os.Getenv(testenv.RedisEnv)
	if os.Getenv(testenv.MySQLEnv) != "" {
		base.MySQLDSN = testenv.MySQLDSN(t)
	}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	// Each user's requests carry an address of their own: with the per-IP
	// limit at the most one user sends, a load from one address would be
	// refused.
	base.RateIP = bench.DefaultMaxPerUser
	opts := tiny(t, base, "")
	opts.Scenarios = []bench.Scenario{bench.ScenarioHot, bench.ScenarioWide}
	opts.Modes = []bench.Mode{bench.ModeChannel, bench.ModeStream, bench.ModeCeiling, bench.ModeBare, bench.ModeFullpipe, bench.ModeNoop}
	opts.Load = bench.LoadWrk
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	t.Log(table.String())
	assertBooks(t, rep, opts)
	if len(rep.Results) != 12 {
		t.Errorf("%d runs, want 12 (hot and wide, six modes each)", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Status == "ok" && (r.Latency.Max <= 0 || r.Latency.Max < r.Latency.P99) {
			t.Errorf("%s/%s: max latency %.3f ms, p99 %.3f ms", r.Scenario, r.Mode, r.Latency.Max, r.Latency.P99)
		}
		assertCPU(t, r, base.RedisURL != "")
	}
}

// assertCPU checks a run's CPU accounting: every claim run has one, wrk's
// share is measured, no figure exceeds what the machine's cores give over
// the window, and a fixed reference's serving process (a child) is measured
// as such, fullpipe's with every order drained into MySQL.
func assertCPU(t *testing.T, r bench.Result, realBackends bool) {
	t.Helper()
	name := string(r.Scenario) + "/" + string(r.Mode)
	if r.Status != "ok" {
		return
	}
	c := r.CPU
	if c == nil || c.Requests != r.Sent || c.WindowSeconds <= 0 {
		t.Errorf("%s: CPU accounting %+v for %d requests", name, c, r.Sent)
		return
	}
	limit := c.WindowSeconds * float64(c.Cores) * 1e6 / float64(c.Requests)
	for what, us := range map[string]float64{"service": c.Service, "Redis": c.Redis, "MySQL": c.MySQL, "wrk": c.LoadGen} {
		if us < 0 || us > limit+1e-6 {
			t.Errorf("%s: %s %.1f µs per request, outside 0..%.1f (the machine's cores over the window)", name, what, us, limit)
		}
	}
	if c.BusyCores > float64(c.Cores) || c.OtherCores > c.BusyCores {
		t.Errorf("%s: %.2f cores busy, %.2f others, of %d", name, c.BusyCores, c.OtherCores, c.Cores)
	}
	if c.LoadGen <= 0 {
		t.Errorf("%s: wrk's CPU not measured", name)
	}
	if r.Mode == bench.ModeBare || r.Mode == bench.ModeFullpipe {
		if c.Service <= 0 || c.LoadGenInService {
			t.Errorf("%s: the reference's own process not measured: %+v", name, c)
		}
		if realBackends && c.Redis <= 0 {
			t.Errorf("%s: Redis's CPU not measured", name)
		}
	}
	if r.Mode == bench.ModeFullpipe && (!r.HasDrain || !r.Drained || r.Books.Created != r.Successes) {
		t.Errorf("%s: %d of %d orders in MySQL (drained %v)", name, r.Books.Created, r.Successes, r.Drained)
	}
}

// benchDatabases lists, sorted and comma-separated, the databases seckill_bench_*
// on dsn's server.
func benchDatabases(t *testing.T, dsn string) string {
	t.Helper()
	return queryList(t, dsn, "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'seckill\\_bench\\_%' ORDER BY schema_name")
}

// tablesOf lists, sorted and comma-separated, the tables of dsn's database.
func tablesOf(t *testing.T, dsn string) string {
	t.Helper()
	return queryList(t, dsn, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY table_name")
}

func queryList(t *testing.T, dsn, query string) string {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(names, ",")
}
