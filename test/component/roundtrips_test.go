package component_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

// requestTraffic counts what claims and HTTP requests send to Redis: n round
// trips (one per command, one per pipeline) and cmds commands. The stream
// worker's background reads carry no request id and are not counted. The
// claim path's automatic pipeliner sends its batches under its own context,
// so a pipeline holding a claim-path command counts too.
type requestTraffic struct {
	n, cmds atomic.Int64
	// requestOnly counts only what carries a request id: with the
	// pipeliner off every command of a request does, and background reads
	// (the warm-up's, or read-backs of logins other tests make on a shared
	// Redis, which send the same HGETs) do not.
	requestOnly bool
}

// claimPathCommand tells the claim path's commands (session lookup, id
// lease, claim and release scripts) from the worker's, by name and, for a
// script, by its first key: the pipeliner sends them under its own context,
// without the request id.
func claimPathCommand(c redis.Cmder) bool {
	switch c.Name() {
	case "hget", "incrby", "expire":
		return true
	case "evalsha", "eval":
		args := c.Args()
		if len(args) < 4 {
			return false
		}
		key, _ := args[3].(string)
		return strings.HasSuffix(key, ":voucher") || strings.Contains(key, "login:token:")
	}
	return false
}

func (r *requestTraffic) countPipeline(ctx context.Context, cmds []redis.Cmder) {
	if httpapi.RequestID(ctx) == "" && (r.requestOnly || !slices.ContainsFunc(cmds, claimPathCommand)) {
		return
	}
	r.n.Add(1)
	r.cmds.Add(int64(len(cmds)))
}

func (r *requestTraffic) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook sees each command of the full-duplex pipeliner's stream on its
// own; the claim's index SET is submitted with its claim script and waited
// for with it, so it is not a round trip of its own.
func (r *requestTraffic) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch {
		case cmd.Name() == "set":
		case httpapi.RequestID(ctx) != "" || (!r.requestOnly && claimPathCommand(cmd)):
			r.n.Add(1)
			r.cmds.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (r *requestTraffic) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.countPipeline(ctx, cmds)
		return next(ctx, cmds)
	}
}

// TestClaimCostsAtMostTwoRedisRoundTrips: a user's first claim costs the token
// lookup and the claim script; a repeat only the script (the original pays 4).
// It runs on the embedded default, which goes through the same adapters.
func TestClaimCostsAtMostTwoRedisRoundTrips(t *testing.T) {
	for _, queue := range []string{infra.QueueChannel, infra.QueueStream} {
		t.Run(queue, func(t *testing.T) {
			cfg := embeddedConfig(t, queue)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			app := run(t, cfg, zerolog.Nop())
			base := "http://" + app.Addr()
			vid := createVoucher(t, app, 100)
			store := redissession.New(app.Redis, redissession.Options{TTL: time.Hour})
			claim := func(user domain.UserID, token string) envelope {
				_, env := postJSON(t, http.DefaultClient, fmt.Sprintf("%s/voucher-order/seckill/%d", base, vid), token, nil)
				return env
			}
			warm, _ := store.Mint(context.Background(), 1)
			if env := claim(1, warm); !env.Success { // loads the script, leases an id block
				t.Fatalf("warm-up claim: %+v", env)
			}
			token, err := store.Mint(context.Background(), 2)
			if err != nil {
				t.Fatal(err)
			}

			counter := &requestTraffic{}
			app.Redis.AddHook(counter)
			if env := claim(2, token); !env.Success {
				t.Fatalf("first claim: %+v", env)
			}
			first := counter.n.Swap(0)
			if env := claim(2, token); env.Code != "duplicate" {
				t.Fatalf("repeat claim: %+v", env)
			}
			repeat := counter.n.Load()
			if first < 1 || first > 2 || repeat != 1 {
				t.Fatalf("round trips: first claim %d (want <= 2), repeat %d (want <= 1)", first, repeat)
			}

			// Once Redis said sold out, this instance answers sold out itself
			// (within Tuning.SoldOutWindow): no round trip at all.
			soldOut := createVoucher(t, app, 1)
			claimOf := func(v domain.VoucherID, token string) envelope {
				_, env := postJSON(t, http.DefaultClient, fmt.Sprintf("%s/voucher-order/seckill/%d", base, v), token, nil)
				return env
			}
			if env := claimOf(soldOut, warm); !env.Success {
				t.Fatalf("claim of the last unit: %+v", env)
			}
			if env := claimOf(soldOut, token); env.Code != "sold_out" {
				t.Fatalf("claim after the last unit: %+v", env)
			}
			counter.n.Store(0)
			for i := 0; i < 20; i++ {
				if env := claimOf(soldOut, token); env.Code != "sold_out" {
					t.Fatalf("repeat claim of a sold-out voucher: %+v", env)
				}
			}
			// The window may lapse once under a slow run; each lapse costs one
			// re-check, never one per request.
			if n := counter.n.Load(); n > 1 {
				t.Fatalf("20 sold-out answers cost %d Redis round trips, want at most 1", n)
			}
		})
	}
}

// TestFirstClaimAfterALoginCostsOneRedisRoundTrip: on a Redis that tracks,
// every instance reads a login back as Redis reports it, so the user's
// first claim costs only its claim script; /metrics shows the read-back.
// Revoking the token then refuses the next claim at once (401).
func TestFirstClaimAfterALoginCostsOneRedisRoundTrip(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			app, base := startServiceOn(t, infra.QueueChannel, b.Name, func(c *infra.Config) {
				// Round trips are counted by a hook, which the automatic
				// pipeliner does not show one by one.
				c.RedisAutoPipeline = infra.AutoPipelineOff
			})
			tracked := app.Sessions
			if !tracked.Tracking() {
				t.Fatal("the session cache does not track on a Redis that tracks")
			}
			vid := createVoucher(t, app, 100)
			claim := func(token string) (int, envelope) {
				return postJSON(t, http.DefaultClient, fmt.Sprintf("%s/voucher-order/seckill/%d", base, vid), token, nil)
			}
			ctx := context.Background()
			store := redissession.New(app.Redis, redissession.Options{TTL: time.Hour})
			warm, err := store.Mint(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, env := claim(warm); !env.Success { // loads the script, leases an id block
				t.Fatalf("warm-up claim: %+v", env)
			}

			readBefore := tracked.Prefetched()
			token, err := store.Mint(ctx, 2) // the login, while the service runs
			if err != nil {
				t.Fatal(err)
			}
			// This login's own read-back, not the counter alone: logins that
			// tests of other packages make on the shared Redis are read back
			// too, and may move it first.
			testenv.Eventually(t, 5*time.Second, func() (bool, string) {
				return tracked.Prefetched() > readBefore && tracked.Holds(token), "the login was not read back"
			})
			// Only what the request sends: with the pipeliner off each of its
			// commands carries its request id, and the read-backs of logins
			// that tests of other packages make on the shared Redis (HGETs
			// too) must not count.
			counter := &requestTraffic{requestOnly: true}
			app.Redis.AddHook(counter)
			if _, env := claim(token); !env.Success {
				t.Fatalf("first claim: %+v", env)
			}
			if n := counter.n.Load(); n != 1 {
				t.Fatalf("a first claim after the login cost %d Redis round trips, want 1 (the claim script)", n)
			}

			fams := scrape(t, "http://"+app.Observability.MetricsAddr()+"/metrics")
			if got := value(fams, "seckill_session_read_back_total", "", ""); got < 2 {
				t.Errorf("seckill_session_read_back_total = %v, want at least 2 (two logins)", got)
			}
			if got := value(fams, "seckill_session_cache_entries", "", ""); got < 2 {
				t.Errorf("seckill_session_cache_entries = %v, want at least 2", got)
			}

			if err := app.Redis.Del(ctx, redissession.DefaultPrefix+token).Err(); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 2*time.Second, func() (bool, string) {
				status, env := claim(token)
				return status == http.StatusUnauthorized, fmt.Sprintf("a revoked token's claim answered %d %+v", status, env)
			})
			fams = scrape(t, "http://"+app.Observability.MetricsAddr()+"/metrics")
			if got := value(fams, "seckill_session_reports_total", "", ""); got < 3 {
				t.Errorf("seckill_session_reports_total = %v, want at least 3 (two logins and a logout)", got)
			}
		})
	}
}

// TestAnInstanceStartsWarm: a user who logged in before the instance
// started finds their session in memory on their first claim, which costs
// only its claim script, once the start's warm-up
// (Tuning.TokenWarm) has read it; without the warm-up the same claim also
// looks the session up (which is what makes the first case mean something).
func TestAnInstanceStartsWarm(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		for _, tc := range []struct {
			name      string
			warm      bool
			wantTrips int64
		}{
			{name: "warm", warm: true, wantTrips: 1},
			{name: "no_warm_up", warm: false, wantTrips: 2},
		} {
			t.Run(b.Name+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				// On one node the service gets a Redis of its own: the paced
				// warm-up of a shared server holding tens of thousands of
				// other runs' sessions may not reach this one in time.
				rdb, url := b.Client(t), ""
				if b.Name == "redis" {
					own := testenv.StartRedis(t)
					rdb, url = own.Client(), own.URL()
				}
				testenv.ForgetTokens(t, rdb)
				early, err := redissession.New(rdb, redissession.Options{TTL: time.Hour}).Mint(ctx, 3)
				if err != nil {
					t.Fatal(err)
				}
				app, base := startServiceOn(t, infra.QueueChannel, b.Name, func(c *infra.Config) {
					c.RedisAutoPipeline = infra.AutoPipelineOff // round trips are counted by a hook
					c.TokenWarm = tc.warm
					if url != "" {
						c.RedisURL = url
					}
				})
				tracked := app.Sessions
				if !tracked.Tracking() {
					t.Fatal("the session cache does not track on a Redis that tracks")
				}
				vid := createVoucher(t, app, 100)
				claim := func(token string) envelope {
					_, env := postJSON(t, http.DefaultClient, fmt.Sprintf("%s/voucher-order/seckill/%d", base, vid), token, nil)
					return env
				}
				// Loads the script and leases an id block, with a login read
				// back while the service runs.
				first, err := redissession.New(app.Redis, redissession.Options{TTL: time.Hour}).Mint(ctx, 1)
				if err != nil {
					t.Fatal(err)
				}
				testenv.Eventually(t, 5*time.Second, func() (bool, string) {
					return tracked.Holds(first), "the login was not read back"
				})
				if env := claim(first); !env.Success {
					t.Fatalf("first claim: %+v", env)
				}
				// Not waiting for the whole warm-up: the shared Redis may
				// hold many sessions of other tests.
				if tc.warm {
					testenv.Eventually(t, 30*time.Second, func() (bool, string) {
						return tracked.Holds(early), fmt.Sprintf("a session from before the start is not warmed: %+v", tracked.WarmProgress())
					})
				} else if p := tracked.WarmProgress(); p.Read != 0 || tracked.Holds(early) {
					t.Fatalf("without the warm-up: %+v, held %v", p, tracked.Holds(early))
				}
				counter := &requestTraffic{requestOnly: true}
				app.Redis.AddHook(counter)
				if env := claim(early); !env.Success {
					t.Fatalf("claim of a user who logged in before the start: %+v", env)
				}
				if n := counter.n.Load(); n != tc.wantTrips {
					t.Fatalf("the first claim of a user who logged in before the start cost %d Redis round trips, want %d", n, tc.wantTrips)
				}
			})
		}
	}
}
