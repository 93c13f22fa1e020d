package redissession_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestSessionsServesAgainAfterAFlushElsewhere: a FLUSHDB of another, empty
// database of the same Redis (an operator's, on a shared server) sends every
// tracking client a flush-everything report, whose payload is null in RESP2
// and which go-redis cannot parse. The cache took that read error for a
// broken connection and stopped serving for good (two commands per lookup
// from then on), though the connection never broke. It must serve from
// memory again within seconds, after reading back what the flush may have
// dropped.
func TestSessionsServesAgainAfterAFlushElsewhere(t *testing.T) {
	// A server of its own: a flush reaches every tracking client of the
	// server, and those of the other packages' tests would feel it.
	own := testenv.StartRedis(t)
	rdb := own.Client()
	ctx := context.Background()
	prefix := testenv.TokenPrefix(t)
	token, err := redissession.New(rdb, redissession.Options{Prefix: prefix}).Mint(ctx, 42)
	if err != nil {
		t.Fatal(err)
	}
	in := newInstance(t, func(testing.TB) redis.UniversalClient { return own.Client() }, prefix, redissession.CacheOptions{})
	if u, err := in.sessions.UserID(ctx, token); err != nil || u != 42 {
		t.Fatalf("first lookup: %d, %v", u, err)
	}
	requireFreeLookups(t, in, token, 42, "the cached token")

	// Another, empty database of the same server.
	opt, err := redis.ParseURL(own.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.DB = 15
	other := redis.NewClient(opt)
	defer other.Close()
	if err := other.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// A write to another session key after it: its report comes after the
	// flush's on the same connection, so once it is heard, so was the flush.
	reports := in.sessions.Reports()
	if err := rdb.Set(ctx, prefix+"marker", "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() (bool, string) {
		return in.sessions.Reports() > reports, "the report of a write after the flush is not heard"
	})
	testenv.Eventually(t, 5*time.Second, func() (bool, string) {
		before := in.sent.all.Load()
		if u, err := in.sessions.UserID(ctx, token); err != nil || u != 42 {
			return false, fmt.Sprintf("lookup: %d, %v", u, err)
		}
		n := in.sent.all.Load() - before
		return n == 0, fmt.Sprintf("a lookup sent %d commands after the flush (%d reports heard since)", n, in.sessions.Reports()-reports)
	})
	requireFreeLookups(t, in, token, 42, "the token after the flush")
	// What an operator watches says what happened: a master's sessions
	// stopped being served once, and are served again.
	if l, n := in.sessions.Serving(); l != n || in.sessions.Downs() != 1 {
		t.Fatalf("serving %d of %d masters after %d downs; want all, after one", l, n, in.sessions.Downs())
	}
}
