package e2e_test

import (
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestGracefulShutdownDrainsTheQueue: SIGTERM right after a burst of claims;
// the process finishes the requests, drains its queue into MySQL and exits.
func TestGracefulShutdownDrainsTheQueue(t *testing.T) {
	for _, queue := range []string{"channel", "stream"} {
		t.Run(queue, func(t *testing.T) {
			c := newCluster(t, "SECKILL_QUEUE="+queue, "SECKILL_SHUTDOWN_TIMEOUT=60s", "SECKILL_STREAM_MIN_IDLE=90s",
				"SECKILL_BATCH_SIZE=5", "SECKILL_WORKERS=1", "SECKILL_BATCH_LINGER=0s")
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

// TestCommands runs the operator commands against real servers.
func TestCommands(t *testing.T) {
	c := newCluster(t)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), c.env...)
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
	t.Run("bad_config_names_the_variable", func(t *testing.T) {
		cmd := exec.Command(binary, "serve")
		cmd.Env = append(os.Environ(), "SECKILL_QUEUE=kafka")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "SECKILL_QUEUE") {
			t.Fatalf("serve with a bad queue: %v\n%s", err, out)
		}
	})
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
