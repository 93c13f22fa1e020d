package component_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
)

// allCommands counts every command the client sends, whoever sends it.
type allCommands struct{ n atomic.Int64 }

func (c *allCommands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *allCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *allCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestSoldOutClaimWithATokenCostsNoRedis: once this instance knows a voucher
// is sold out, a claim that carries a token is answered sold out before its
// session is resolved (a token never seen before, so no cache could hold
// it): zero Redis commands. Without a token the answer is still 401.
func TestSoldOutClaimWithATokenCostsNoRedis(t *testing.T) {
	cfg := infra.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Queue = infra.QueueChannel // no stream consumer polling Redis
	cfg.RestoreInterval = 0        // no periodic gate check either
	cfg.SoldOutWindow = 10 * time.Second
	cfg.AdminUsers = adminUIDs
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	app := run(t, cfg, zerolog.Nop())
	vid := createVoucher(t, app, 1)
	url := fmt.Sprintf("http://%s/voucher-order/seckill/%d", app.Addr(), vid)
	store := redissession.New(app.Redis, redissession.Options{TTL: time.Hour})
	mint := func(u int64) string {
		tok, err := store.Mint(context.Background(), domain.UserID(u))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if _, env := postJSON(t, http.DefaultClient, url, mint(1), nil); !env.Success {
		t.Fatalf("claim of the only unit: %+v", env)
	}
	if _, env := postJSON(t, http.DefaultClient, url, mint(2), nil); env.Code != "sold_out" {
		t.Fatalf("claim after the last unit (sets the mark): %+v", env)
	}
	fresh := mint(3)

	counter := &allCommands{}
	app.Redis.AddHook(counter)
	status, env := postJSON(t, http.DefaultClient, url, fresh, nil)
	if status != http.StatusOK || env.Code != "sold_out" {
		t.Fatalf("sold-out claim with a token: %d %+v, want 200 sold_out", status, env)
	}
	if n := counter.n.Load(); n != 0 {
		t.Fatalf("a sold-out claim with a token cost %d Redis commands, want 0", n)
	}
	if status, env := postJSON(t, http.DefaultClient, url, "", nil); status != http.StatusUnauthorized {
		t.Fatalf("sold-out claim without a token: %d %+v, want 401", status, env)
	}
}
