package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestGracefulShutdownDrainsTheQueue: SIGTERM right after a burst of claims;
// the process finishes the requests, drains its queue into MySQL and exits.
func TestGracefulShutdownDrainsTheQueue(t *testing.T) {
	for _, queue := range []string{"channel", "stream"} {
		t.Run(queue, func(t *testing.T) {
			c := newCluster(t, "SECKILL_QUEUE="+queue, "SECKILL_SHUTDOWN_TIMEOUT=60s", "SECKILL_STREAM_MIN_IDLE=90s",
				"SECKILL_BATCH_SIZE=5")
			p := c.start("svc")
			const users = 1000
			vid := p.createVoucher(t, users)
			won := claimAll(t, []*proc{p}, vid, c.mint(users, 11_000_000))
			before := c.books(vid).orders
			p.stop(t)
			after := c.books(vid)
			if before >= len(won) {
				t.Fatalf("the queue was drained before SIGTERM (%d orders); the test proves nothing", before)
			}
			if after.orders != len(won) || after.users != len(won) || after.dbStock != 0 {
				t.Fatalf("after SIGTERM with %d of %d in MySQL: %+v; want every order drained", before, len(won), after)
			}
			if !strings.Contains(p.log.String(), "queue drained") {
				t.Fatalf("no 'queue drained' in the log")
			}
			t.Logf("%s: SIGTERM with %d of %d orders in MySQL; %d after the graceful stop", queue, before, len(won), after.orders)
		})
	}
}

// TestIdleServiceStopsPromptlyAndSaysSo: an idle service exits on SIGTERM
// within a few stream blocks of 200ms (README promises about one), and its last
// log line says it stopped. The bound is ten blocks, far above the ~10 ms it
// takes, so only a real wait (a blocking read, a ticker, a lease) trips it.
func TestIdleServiceStopsPromptlyAndSaysSo(t *testing.T) {
	for _, queue := range []string{"channel", "stream"} {
		t.Run(queue, func(t *testing.T) {
			c := newCluster(t, "SECKILL_QUEUE="+queue)
			p := c.start("svc")
			start := p.log.String()
			// The start line names the Redis the test gave, whatever its
			// database number, without a password.
			opt, err := redis.ParseURL(os.Getenv(testenv.RedisEnv))
			if err != nil {
				t.Fatal(err)
			}
			redisLine := fmt.Sprintf(`"redis":"redis://%s/%d"`, opt.Addr, opt.DB)
			if !strings.Contains(start, redisLine) || !strings.Contains(start, `"db":"mysql://root@tcp(`) ||
				(queue == "stream") != strings.Contains(start, `"consumer":"`) {
				t.Fatalf("the start line does not name Redis, the database and (stream) the consumer:\n%s", lastLines(start, 5))
			}
			began := time.Now()
			p.stop(t)
			took := time.Since(began)
			if took > 2*time.Second {
				t.Fatalf("an idle %s service took %s to exit after SIGTERM, want about one stream block (200ms)", queue, took)
			}
			last := lastLines(p.log.String(), 1)
			if !strings.Contains(last, `"message":"stopped"`) || !strings.Contains(last, `"level":"info"`) {
				t.Fatalf("last log line is not an info 'stopped':\n%s", lastLines(p.log.String(), 5))
			}
			t.Logf("%s: exited %s after SIGTERM", queue, took)
		})
	}
}

// TestCommands runs the operator commands against real servers.
func TestCommands(t *testing.T) {
	c := newCluster(t)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(baseEnv(), c.env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Run("migrate_up_status_down", func(t *testing.T) {
		if out, err := run("migrate", "up"); err != nil || !strings.Contains(out, "applied:") {
			t.Fatalf("migrate up: %v\n%s", err, out)
		}
		if out, err := run("migrate", "status"); err != nil || !strings.Contains(out, "pending: none") {
			t.Fatalf("migrate status: %v\n%s", err, out)
		}
		if out, err := run("migrate", "down"); err != nil || !strings.Contains(out, "rolled back:") {
			t.Fatalf("migrate down: %v\n%s", err, out)
		}
		if out, err := run("migrate", "sideways"); err == nil {
			t.Fatalf("an unknown action must fail:\n%s", out)
		}
	})
	t.Run("token_mints_working_tokens", func(t *testing.T) {
		out, err := run("token", "--user", "42", "--count", "3")
		if err != nil {
			t.Fatalf("token: %v\n%s", err, out)
		}
		tokens := strings.Fields(out)
		for _, tok := range tokens {
			t.Cleanup(func() { c.rdb.Del(context.Background(), redissession.DefaultPrefix+tok) })
		}
		if len(tokens) != 3 {
			t.Fatalf("want 3 tokens, got %q", out)
		}
		p := c.start("svc")
		vid := p.createVoucher(t, 10)
		for _, tok := range tokens {
			status, env := call(t, http.DefaultClient, http.MethodPost, p.base+"/voucher-order/seckill/"+itoa(int64(vid)), tok, nil)
			if status != http.StatusOK || !env.Success {
				t.Fatalf("claim with a minted token: %d %+v", status, env)
			}
		}
		if out, err := run("token", "--user", "0"); err == nil {
			t.Fatalf("user 0 must be refused:\n%s", out)
		}
	})
	t.Run("help_is_not_a_failure_and_points_to_the_variables", func(t *testing.T) {
		for _, args := range [][]string{{"serve", "--help"}, {"migrate", "-h"}, {"token", "--help"}, {"help"}} {
			out, err := run(args...)
			if err != nil {
				t.Fatalf("%v: %v (want exit 0)\n%s", args, err, out)
			}
		}
		out, _ := run("serve", "--help")
		for _, want := range []string{"SECKILL_REDIS_URL", "SECKILL_CONSUMER", "SECKILL_SHUTDOWN_TIMEOUT", "-no-migrate"} {
			if !strings.Contains(out, want) {
				t.Fatalf("serve --help does not mention %s:\n%s", want, out)
			}
		}
		if out, err := run(); err == nil {
			t.Fatalf("no command must fail:\n%s", out)
		}
	})
	t.Run("unknown_migrate_action_opens_no_database", func(t *testing.T) {
		cmd := exec.Command(binary, "migrate", "bogus")
		// A database that cannot answer: reaching it would show in the error.
		cmd.Env = append(append(baseEnv(), c.env...), "SECKILL_MYSQL_DSN=root@tcp(127.0.0.1:1)/nope")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), `unknown migrate action "bogus"`) || strings.Contains(string(out), "database") {
			t.Fatalf("migrate bogus: %v\n%s", err, out)
		}
	})
	t.Run("commands_print_no_json_logs", func(t *testing.T) {
		// The embedded database warns at open: the warning must read as text.
		cmd := exec.Command(binary, "migrate", "up")
		cmd.Env = append(append(baseEnv(), c.env...), "SECKILL_MYSQL_DSN=", "SECKILL_DATA_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), `{"level"`) || !strings.Contains(string(out), "embedded SQLite") {
			t.Fatalf("migrate up on SQLite: %v\n%s", err, out)
		}
	})
	t.Run("redis_down_is_one_clear_line", func(t *testing.T) {
		cmd := exec.Command(binary, "serve")
		cmd.Env = append(append(baseEnv(), c.env...), "SECKILL_REDIS_URL=redis://127.0.0.1:1/0")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(lastLines(string(out), 1), "redis at 127.0.0.1:1 does not answer") {
			t.Fatalf("serve with Redis down: %v\n%s", err, out)
		}
		if strings.Contains(string(out), "pool.go") || strings.Contains(string(out), "redis: 20") {
			t.Fatalf("go-redis's own log lines reach stderr:\n%s", out)
		}
	})
	t.Run("bad_config_names_the_variable", func(t *testing.T) {
		cmd := exec.Command(binary, "serve")
		cmd.Env = append(baseEnv(), "SECKILL_QUEUE=kafka")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "SECKILL_QUEUE") {
			t.Fatalf("serve with a bad queue: %v\n%s", err, out)
		}
	})
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
