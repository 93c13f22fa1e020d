package e2e_test

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSecondInstanceUnderTheSameConsumerNameIsRefused: two live processes
// under one SECKILL_CONSUMER would share a pending list unnoticed; the second
// refuses to start and says why. A kill -9'd holder stops renewing, so its
// restart under the same name takes the name over once the lease expires.
func TestSecondInstanceUnderTheSameConsumerNameIsRefused(t *testing.T) {
	// MinIdle 3s makes the lease 1s (a third, at least 1s).
	c := newCluster(t, "SECKILL_QUEUE=stream", "SECKILL_CONSUMER=node-x",
		"SECKILL_STREAM_MIN_IDLE=3s", "SECKILL_SHUTDOWN_TIMEOUT=2s")
	first := c.start("first")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve")
	cmd.Env = append(append(baseEnv(), c.env...), "SECKILL_HTTP_ADDR="+freeAddr(t))
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("a second instance named node-x started (err %v, ctx %v):\n%s", err, ctx.Err(), out)
	}
	if !strings.Contains(string(out), `SECKILL_CONSUMER="node-x" is in use by another running instance`) {
		t.Fatalf("the refusal does not say why:\n%s", lastLines(string(out), 10))
	}

	// The first is unaffected, and after its kill -9 a restart takes over.
	if status, _ := call(t, http.DefaultClient, http.MethodGet, first.base+"/readyz", "", nil); status != http.StatusOK {
		t.Fatalf("first instance readyz %d after the refusal", status)
	}
	first.kill9(t)
	restarted := c.start("restarted")
	if !strings.Contains(restarted.log.String(), "waiting for it to expire") {
		t.Logf("the restart found the lease already expired (slow machine?)")
	}
	restarted.stop(t)
	// A graceful stop released the name: the next start does not wait.
	again := c.start("again")
	if strings.Contains(again.log.String(), "waiting for it to expire") {
		t.Fatalf("a start after a graceful stop waited for the lease:\n%s", lastLines(again.log.String(), 10))
	}
}
