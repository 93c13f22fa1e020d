package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
)

func token(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("token", `usage: seckill token --user ID [--count N]

Mints hmdp login tokens (the hash login:token:<token>, field id, expiring after
30 minutes, as the original's login) for users ID..ID+N-1 on the Redis that
SECKILL_REDIS_URL or SECKILL_REDIS_CLUSTER_ADDRS names, and prints one token a
line. For tests and load: real users log in through the shop. With the
embedded Redis, use POST /dev/tokens of `+"`seckill serve`"+` instead.

flags:
`, stderr)
	user := fs.Int64("user", 0, "first user id (required, > 0)")
	count := fs.Int("count", 1, "how many consecutive users to mint tokens for (1..1000000)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *user <= 0 {
		return errors.New("token: --user must be a positive user id")
	}
	if *count < 1 || *count > 1_000_000 {
		return errors.New("token: --count must be within 1..1000000")
	}
	cfg, log, err := loadCLI(stderr)
	if err != nil {
		return err
	}
	if !cfg.RealRedis() {
		return errors.New("token: neither SECKILL_REDIS_URL nor SECKILL_REDIS_CLUSTER_ADDRS is set; the embedded Redis lives inside `seckill serve`, " +
			"so mint tokens there with POST /dev/tokens (SECKILL_DEV_ENDPOINTS=true)")
	}
	rdb, cleanup, err := infra.NewRedis(cfg, log)
	if err != nil {
		return err
	}
	defer cleanup()
	store := redissession.New(rdb, redissession.Options{TTL: cfg.TokenTTL})
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	for i := 0; i < *count; i++ {
		t, err := store.Mint(ctx, domain.UserID(*user+int64(i)))
		if err != nil {
			return fmt.Errorf("mint token for user %d: %w", *user+int64(i), err)
		}
		fmt.Fprintln(w, t)
	}
	return nil
}
