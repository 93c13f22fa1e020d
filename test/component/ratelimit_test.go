package component_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/infra"
)

// TestLimitedRequestsCostNoRedis: through the wired service, a claim over
// the per-user limit and a request over the per-IP limit (even with an
// unknown token, which the session cache cannot answer) send nothing to
// Redis. It runs on the embedded default, over the same adapters.
func TestLimitedRequestsCostNoRedis(t *testing.T) {
	const perUser, perIP = 3, 20
	cfg := embeddedConfig(t, infra.QueueStream)
	cfg.RateUser, cfg.RateIP, cfg.RateWindow = perUser, perIP, time.Hour
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	app := run(t, cfg, zerolog.Nop())
	vid := createVoucher(t, app, 100)
	token, err := redissession.New(app.Redis, redissession.Options{TTL: time.Hour}).Mint(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://%s/voucher-order/seckill/%d", app.Addr(), vid)

	for i := 0; i < perUser; i++ {
		if status, env := postJSON(t, http.DefaultClient, url, token, nil); status != http.StatusOK {
			t.Fatalf("claim %d under the limit: %d %+v", i+1, status, env)
		}
	}
	counter := &requestTraffic{}
	app.Redis.AddHook(counter)
	sent := perUser
	for i := 0; i < 5; i++ {
		status, env := postJSON(t, http.DefaultClient, url, token, nil)
		sent++
		if status != http.StatusTooManyRequests || env.Code != "rate_limited" || env.ErrorMsg == "" {
			t.Fatalf("claim over the user limit: %d %+v", status, env)
		}
	}
	if n := counter.n.Load(); n != 0 {
		t.Fatalf("5 claims over the user limit cost %d Redis round trips, want 0", n)
	}

	// Unknown tokens cost a lookup each until the IP's budget is spent (which
	// also shows the counter sees session lookups).
	for ; sent < perIP; sent++ {
		if status, _ := postJSON(t, http.DefaultClient, url, fmt.Sprintf("guess-%d", sent), nil); status != http.StatusUnauthorized {
			t.Fatalf("unknown token under the IP limit: %d, want 401", status)
		}
	}
	if n := counter.n.Load(); n == 0 {
		t.Fatal("unknown tokens under the IP limit cost no Redis round trip: the counter sees nothing")
	}
	counter.n.Store(0)
	for i := 0; i < 5; i++ {
		if status, env := postJSON(t, http.DefaultClient, url, fmt.Sprintf("guess-more-%d", i), nil); status != http.StatusTooManyRequests || env.Code != "rate_limited" {
			t.Fatalf("request over the IP limit: %d %+v", status, env)
		}
	}
	if n := counter.n.Load(); n != 0 {
		t.Fatalf("5 requests over the IP limit cost %d Redis round trips, want 0", n)
	}
}
