package redisstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
)

// A consumer name's lease keeps two live processes from sharing one name, and
// so one pending list.

// ErrLeaseHeld: another live holder kept renewing the lease for the whole wait.
var ErrLeaseHeld = errors.New("held by another live process")

// LeaseOptions of AcquireLease.
type LeaseOptions struct {
	// TTL is how long the lease outlives its holder's last renewal (renewed every TTL/3).
	TTL time.Duration
	// Wait for a taken lease to expire; above TTL, a restart right after a kill -9 succeeds.
	Wait time.Duration
	Log  zerolog.Logger
}

// Lease is held from AcquireLease until Release.
type Lease struct {
	rdb     redis.UniversalClient
	key     string
	token   string
	opts    LeaseOptions
	release func() error
}

// Only while the key holds this holder's token: a lease taken by another
// after it expired must not be extended by its former holder.
var leaseRenewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)

// AcquireLease takes the lease on key, waiting up to opts.Wait for a holder
// that stopped renewing to let it expire; a live holder keeps it, and the
// error wraps ErrLeaseHeld and names it.
func AcquireLease(ctx context.Context, rdb redis.UniversalClient, key string, opts LeaseOptions) (*Lease, error) {
	if opts.TTL < 100*time.Millisecond {
		return nil, fmt.Errorf("redisstream: lease TTL %s is below 100ms", opts.TTL)
	}
	// The token names this process, so a refusal can say who holds the name,
	// and is random, so two holders never mistake each other.
	var b [8]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	token := fmt.Sprintf("%s/pid-%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	deadline := time.Now().Add(opts.Wait)
	poll := max(opts.TTL/10, 50*time.Millisecond)
	for first := true; ; first = false {
		ok, err := rdb.SetNX(ctx, key, token, opts.TTL).Result()
		if err != nil {
			return nil, fmt.Errorf("take lease %s: %w", key, err)
		}
		if ok {
			break
		}
		holder, _ := rdb.Get(ctx, key).Result()
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("lease %s: %w (%s) that renewed it for %s", key, ErrLeaseHeld, holder, opts.Wait)
		}
		if first {
			opts.Log.Warn().Str("key", key).Str("holder", holder).Str("wait", opts.Wait.String()).
				Msg("lease taken; waiting for it to expire (a killed holder) or to be refused (a live one)")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan struct{})
	l := &Lease{rdb: rdb, key: key, token: token, opts: opts}
	go every(rctx, opts.TTL/3, stopped, l.renewLease)
	l.release = sync.OnceValue(func() error {
		stop()
		<-stopped
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := redisx.Release(ctx, rdb, key, token); err != nil {
			return fmt.Errorf("release lease %s: %w", key, err)
		}
		return nil
	})
	return l, nil
}

// renewLease renews the lease, and takes it back if it lapsed while nobody else held it.
func (l *Lease) renewLease(ctx context.Context) {
	n, err := leaseRenewScript.Run(ctx, l.rdb, []string{l.key}, l.token, l.opts.TTL.Milliseconds()).Int()
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		// Transient: the next tick retries; the lease lasts TTL meanwhile.
		l.opts.Log.Warn().Err(err).Str("key", l.key).Msg("renewing the lease failed")
	case n == 0:
		// Gone (Redis lost it, or this process stalled past TTL): only
		// another holder is an operator's problem.
		ok, err := l.rdb.SetNX(ctx, l.key, l.token, l.opts.TTL).Result()
		switch {
		case ok:
			l.opts.Log.Warn().Str("key", l.key).
				Msg("the lease had lapsed (Redis lost it, or this process stalled) and is held again; nobody else had taken the name")
		case err == nil:
			holder, _ := l.rdb.Get(ctx, l.key).Result()
			l.opts.Log.Error().Str("key", l.key).Str("holder", holder).
				Msg("the lease was taken by another instance under the same name while it had lapsed: two instances now share one consumer name; stop one of them (SECKILL_CONSUMER must be unique)")
		default:
			l.opts.Log.Warn().Err(err).Str("key", l.key).Msg("the lease had lapsed and taking it back failed; retrying")
		}
	}
}

// Release stops renewing and frees the name at once, so a restart need not
// wait for the TTL. Idempotent.
func (l *Lease) Release() error { return l.release() }
