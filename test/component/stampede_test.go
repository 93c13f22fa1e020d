// Package component runs the wired service in-process, over real HTTP, against
// the real Redis and MySQL named by the test environment.
package component_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testapp"
	"github.com/hmdp-go/seckill/test/testenv"
)

type envelope struct {
	Success  bool            `json:"success"`
	ErrorMsg string          `json:"errorMsg"`
	Code     string          `json:"code"`
	Data     json.RawMessage `json:"data"`
}

// startServiceOn wires and starts the service with its own database and key
// prefix on the named real Redis backend: "redis"
// (one node) or "redis_cluster" (testenv.RealRedisBackends); it stops when
// the test ends.
func startServiceOn(t *testing.T, queue, backend string, tune ...func(*infra.Config)) (*infra.App, string) {
	t.Helper()
	cfg := infra.DefaultConfig()
	switch backend {
	case "redis":
		testenv.RealRedis(t) // skips or fails first, with the standard message
		cfg.RedisURL = os.Getenv(testenv.RedisEnv)
	case "redis_cluster":
		testenv.RedisCluster(t)
		cfg.RedisClusterAddrs = strings.Split(os.Getenv(testenv.RedisClusterEnv), ",")
	default:
		t.Fatalf("unknown Redis backend %q", backend)
	}
	cfg.MySQLDSN = testenv.MySQLDSN(t)
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.MetricsAddr = "127.0.0.1:0"
	cfg.KeyPrefix = testenv.KeyPrefix(t)
	cfg.Queue = queue
	cfg.AdminUsers = adminUIDs
	// Thousands of users claim from this one loopback address: the per-IP
	// limit would stand in for a NAT gateway it is not meant to throttle.
	cfg.RateIP = 0
	for _, f := range tune {
		f(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last: after the service stopped writing.
	// A shared Redis (or cluster) must not keep every run's keys for a day.
	t.Cleanup(func() {
		rdb, done, err := infra.NewRedis(cfg, zerolog.Nop())
		if err != nil {
			return
		}
		defer done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = testenv.DeletePrefix(ctx, rdb, cfg.KeyPrefix)
	})
	app := run(t, cfg, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	return app, "http://" + app.Addr()
}

// embeddedConfig is the service as `make run` starts it, on the embedded
// Redis and SQLite (the same adapters as on servers), on free loopback ports.
// Not yet validated: a test may tune it first.
func embeddedConfig(t *testing.T, queue string) infra.Config {
	cfg := infra.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.MetricsAddr = "127.0.0.1:0"
	cfg.Queue = queue
	cfg.AdminUsers = adminUIDs
	return cfg
}

// run starts the service cfg describes for the test (testapp.Start).
func run(t *testing.T, cfg infra.Config, log zerolog.Logger) *infra.App {
	t.Helper()
	return testapp.Start(t, cfg, log)
}

func postJSON(t *testing.T, c *http.Client, url, token string, body any) (int, envelope) {
	t.Helper()
	var r io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(http.MethodPost, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("authorization", token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", url, err)
		return 0, envelope{}
	}
	defer resp.Body.Close()
	var env envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Errorf("POST %s: status %d, undecodable body: %v", url, resp.StatusCode, err)
	}
	return resp.StatusCode, env
}

// adminUID is the admin these tests create vouchers as; no claiming user
// has this id.
const (
	adminUID  = 999
	adminUIDs = "999"
)

// login mints a login token for user in the service's Redis, as the
// original's login writes one.
func login(t *testing.T, app *infra.App, user domain.UserID) string {
	t.Helper()
	token, err := redissession.New(app.Redis, redissession.Options{TTL: time.Hour}).Mint(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// claim sends the claim of the token's user on vid through HTTP.
func claim(t *testing.T, app *infra.App, vid domain.VoucherID, token string) envelope {
	t.Helper()
	_, env := postJSON(t, http.DefaultClient, fmt.Sprintf("http://%s/voucher-order/seckill/%d", app.Addr(), vid), token, nil)
	return env
}

// mustClaim logs user in and claims vid, and fails the test unless it succeeds.
func mustClaim(t *testing.T, app *infra.App, vid domain.VoucherID, user domain.UserID) {
	t.Helper()
	if env := claim(t, app, vid, login(t, app, user)); !env.Success {
		t.Fatalf("claim of user %d on voucher %d: %+v", user, vid, env)
	}
}

// createVoucher creates a voucher through the API, as the admin.
func createVoucher(t *testing.T, app *infra.App, stock int) domain.VoucherID {
	t.Helper()
	return createVoucherAs(t, app, login(t, app, adminUID), stock)
}

// saleBody is a voucher on sale from a minute ago for an hour.
func saleBody(stock int) map[string]any {
	now := time.Now().UTC()
	return map[string]any{
		"shopId": 1, "title": "stampede", "payValue": 100, "actualValue": 1000, "type": 1,
		"stock": stock, "beginTime": now.Add(-time.Minute).Format(time.RFC3339),
		"endTime": now.Add(time.Hour).Format(time.RFC3339),
	}
}

// createVoucherAs creates a voucher through the API with an admin's token.
func createVoucherAs(t *testing.T, app *infra.App, token string, stock int) domain.VoucherID {
	t.Helper()
	status, env := postJSON(t, http.DefaultClient, "http://"+app.Addr()+"/voucher/seckill", token, saleBody(stock))
	if status != http.StatusOK || !env.Success {
		t.Fatalf("create voucher: %d %+v", status, env)
	}
	var s string
	if err := json.Unmarshal(env.Data, &s); err != nil {
		t.Fatalf("voucher id %s: %v", env.Data, err)
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return domain.VoucherID(id)
}

// stampedeConns bounds the client connections of a stampede test.
const stampedeConns = 256

// TestStampedeSellsExactlyTheStock is the start-gate race through HTTP: 2,000
// users fire 3 claims each at once on a voucher with stock 100.
func TestStampedeSellsExactlyTheStock(t *testing.T) {
	const (
		stock    = 100
		users    = 2000
		perUser  = 3
		firstUID = 1_000_000
	)
	for _, b := range testenv.RealRedisBackends() {
		for _, queue := range []string{infra.QueueChannel, infra.QueueStream} {
			t.Run(b.Name+"/"+queue, func(t *testing.T) {
				app, base := startServiceOn(t, queue, b.Name)
				vid := createVoucher(t, app, stock)

				ctx := context.Background()
				sessions := redissession.New(app.Redis, redissession.Options{TTL: time.Hour})
				tokens := make([]string, users)
				for i := range tokens {
					tok, err := sessions.Mint(ctx, domain.UserID(firstUID+i))
					if err != nil {
						t.Fatal(err)
					}
					tokens[i] = tok
				}

				// Every request is fired at once, over at most stampedeConns
				// connections: thousands of connections opened in the same
				// instant by the test's own process starve the server of the
				// CPU it needs to read their headers (on two loaded cores under
				// the race detector it closed some unread: EOF). The claims are
				// still concurrent; the connections are what a load balancer
				// would pool anyway.
				client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: stampedeConns, MaxIdleConnsPerHost: stampedeConns}, Timeout: time.Minute}
				tally := newClaimTally(t, client, base, fmt.Sprintf("%s/voucher-order/seckill/%d", base, vid), tokens)
				// On a loaded machine some claims run past their budget (busy,
				// outcome_unknown); their users press again, as a client does.
				tally.stampede(perUser)
				won := tally.won
				if len(won) != stock {
					t.Fatalf("%d users hold an order, want exactly %d (refusals: %v)", len(won), stock, tally.codes)
				}

				// The database catches up asynchronously: poll with a deadline.
				type row struct {
					ID     int64 `bun:"id"`
					UserID int64 `bun:"user_id"`
				}
				var rows []row
				testenv.Eventually(t, 30*time.Second, func() (bool, string) {
					rows = rows[:0]
					if err := app.DB.NewSelect().Table("tb_voucher_order").Column("id", "user_id").
						Where("voucher_id = ?", vid).Scan(ctx, &rows); err != nil {
						t.Fatal(err)
					}
					return len(rows) >= stock, fmt.Sprintf("MySQL holds %d of %d orders", len(rows), stock)
				})
				if len(rows) != stock {
					t.Fatalf("MySQL holds %d orders, want %d", len(rows), stock)
				}
				for _, r := range rows {
					if got := won[int(r.UserID)-firstUID]; got != strconv.FormatInt(r.ID, 10) {
						t.Fatalf("MySQL order %d of user %d was not the one the user was told (%q)", r.ID, r.UserID, got)
					}
				}
				var dbStock int
				if err := app.DB.NewSelect().Table("tb_seckill_voucher").Column("stock").
					Where("voucher_id = ?", vid).Scan(ctx, &dbStock); err != nil {
					t.Fatal(err)
				}
				if dbStock != 0 {
					t.Fatalf("MySQL stock %d, want 0", dbStock)
				}
				redisStock, err := app.Redis.HGet(ctx, redisschema.KeysFor(app.Config.KeyPrefix, vid).Voucher, "stock").Int()
				if err != nil || redisStock != 0 {
					t.Fatalf("Redis stock %d (%v), want 0", redisStock, err)
				}
			})
		}
	}
}
