package infra_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testapp"
)

// startEmbedded runs the wired service on the embedded backends.
func startEmbedded(t *testing.T, c infra.Config, log zerolog.Logger) *infra.App {
	t.Helper()
	c.HTTPAddr = "127.0.0.1:0"
	c.MetricsAddr = "127.0.0.1:0" // test packages run in parallel: no fixed port
	c.DataDir = t.TempDir()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return testapp.Start(t, c, log)
}

// TestTokenCacheTTLZeroRevokesAtOnce: with Tuning.TokenCacheTTL=0 a login
// deleted from Redis is refused on the very next request; with the default
// cache it is still accepted (which is what makes the first half mean
// something).
func TestTokenCacheTTLZeroRevokesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ttl         time.Duration
		wantRevoked bool
	}{
		{name: "no_cache", ttl: 0, wantRevoked: true},
		{name: "default_cache", ttl: 10 * time.Second, wantRevoked: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := infra.DefaultConfig()
			c.Queue = infra.QueueChannel
			c.TokenCacheTTL = tc.ttl
			app := startEmbedded(t, c, zerolog.Nop())
			ctx := context.Background()
			const token, key = "revoke-me", "login:token:revoke-me"
			if err := app.Redis.HSet(ctx, key, "id", 77).Err(); err != nil {
				t.Fatal(err)
			}
			status := func() int {
				req := httptest.NewRequest(http.MethodGet, "/voucher-order/1", nil)
				req.Header.Set("authorization", token)
				rec := httptest.NewRecorder()
				app.Handler.ServeHTTP(rec, req)
				_, _ = io.Copy(io.Discard, rec.Body)
				return rec.Code
			}
			if got := status(); got == http.StatusUnauthorized {
				t.Fatalf("a live login answered %d", got)
			}
			if err := app.Redis.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			if revoked := status() == http.StatusUnauthorized; revoked != tc.wantRevoked {
				t.Fatalf("right after deletion: revoked=%v, want %v", revoked, tc.wantRevoked)
			}
		})
	}
}

// TestMakeRunWarnsOnlyOfWhatItChose: `make run` (embedded backends, the dev
// endpoint, user 1 as admin) warns of those choices and of nothing a
// newcomer would have to look up; the embedded Redis's lack of CLIENT
// TRACKING is expected there and said at info level.
func TestMakeRunWarnsOnlyOfWhatItChose(t *testing.T) {
	c := infra.DefaultConfig()
	c.DevEndpoints = true
	c.AdminUsers = "1"
	var logs bytes.Buffer
	startEmbedded(t, c, zerolog.New(&logs).Level(zerolog.WarnLevel))
	expected := []string{"embedded SQLite", "embedded Redis", "dev endpoint"}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		known := false
		for _, e := range expected {
			known = known || strings.Contains(line, e)
		}
		if !known {
			t.Errorf("make run warns of something it did not choose: %s", line)
		}
	}
}
