package redisstream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/redisstream"
	"github.com/hmdp-go/seckill/test/testenv"
)

const ttl = 300 * time.Millisecond

func opts(wait time.Duration) redisstream.LeaseOptions {
	return redisstream.LeaseOptions{TTL: ttl, Wait: wait, Log: zerolog.Nop()}
}

func TestALiveHolderKeepsTheLease(t *testing.T) {
	rdb := testenv.RealRedis(t)
	key := testenv.KeyPrefix(t) + "consumer:a"
	ctx := context.Background()
	first, err := redisstream.AcquireLease(ctx, rdb, key, opts(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Release() })
	// The second waits well past the TTL: only renewal can keep the first's.
	_, err = redisstream.AcquireLease(ctx, rdb, key, opts(3*ttl))
	if !errors.Is(err, redisstream.ErrLeaseHeld) {
		t.Fatalf("second Acquire = %v, want ErrHeld", err)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	// Released: free at once, no waiting.
	second, err := redisstream.AcquireLease(ctx, rdb, key, opts(0))
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	_ = second.Release()
}

func TestADeadHoldersLeaseIsTakenOnceItExpires(t *testing.T) {
	rdb := testenv.RealRedis(t)
	key := testenv.KeyPrefix(t) + "consumer:a"
	ctx := context.Background()
	// What a kill -9 leaves: the key, with its TTL running, and no renewal.
	if err := rdb.Set(ctx, key, "dead-host/pid-1/x", ttl).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := redisstream.AcquireLease(ctx, rdb, key, opts(0)); !errors.Is(err, redisstream.ErrLeaseHeld) {
		t.Fatalf("Acquire without waiting = %v, want ErrHeld", err)
	}
	l, err := redisstream.AcquireLease(ctx, rdb, key, opts(2*ttl))
	if err != nil {
		t.Fatalf("Acquire waiting out the dead lease: %v", err)
	}
	defer l.Release()
	if v := rdb.Get(ctx, key).Val(); v == "dead-host/pid-1/x" {
		t.Fatal("the key still holds the dead holder")
	}
}

func TestReleaseLeavesAnotherHoldersLease(t *testing.T) {
	rdb := testenv.RealRedis(t)
	key := testenv.KeyPrefix(t) + "consumer:a"
	ctx := context.Background()
	l, err := redisstream.AcquireLease(ctx, rdb, key, opts(0))
	if err != nil {
		t.Fatal(err)
	}
	// The lease was lost (expired and taken) while this holder stalled.
	if err := rdb.Set(ctx, key, "other", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(ctx, key).Val(); v != "other" {
		t.Fatalf("Release deleted or changed another holder's lease: %q", v)
	}
	rdb.Del(ctx, key)
}

// TestALeaseLostWithRedisIsTakenBackWithoutAlarm: Redis restarted empty (or
// failed over to a replica without the key) drops the lease while its
// holder lives. Nobody else holds the name, so the renewal takes it back
// and says so; it must not tell the operator to restart (it said "lease
// lost ... restart this one", then "taken again", a second apart).
func TestALeaseLostWithRedisIsTakenBackWithoutAlarm(t *testing.T) {
	rdb := testenv.RealRedis(t)
	key := testenv.KeyPrefix(t) + "consumer:a"
	ctx := context.Background()
	logs := &testenv.LogBuffer{}
	o := opts(0)
	o.Log = zerolog.New(logs)
	l, err := redisstream.AcquireLease(ctx, rdb, key, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	token := rdb.Get(ctx, key).Val()
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() (bool, string) {
		v := rdb.Get(ctx, key).Val()
		return v == token, fmt.Sprintf("key holds %q, want the holder's %q back", v, token)
	})
	out := logs.String()
	if strings.Contains(out, "restart") || strings.Contains(out, `"level":"error"`) || !strings.Contains(out, "held again") {
		t.Fatalf("logs after the lease was taken back:\n%s\nwant one warning that it is held again, no error, no restart", out)
	}

	// Another instance took the name meanwhile: that is an error, naming it.
	if err := rdb.Set(ctx, key, "other-host/pid-2/y", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), "other-host/pid-2/y"), "no error naming the other holder yet"
	})
}
