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

// A consumer name's lease: an exclusive, expiring claim on the name in Redis,
// so two live processes cannot both act under it (two instances sharing a
// name would share one pending list and each re-read and renew what the
// other is writing).

// ErrLeaseHeld: another live holder kept renewing the lease for the whole wait.
var ErrLeaseHeld = errors.New("held by another live process")

// LeaseOptions of AcquireLease.
type LeaseOptions struct {
	// TTL is how long the lease outlives its holder's last renewal: a
	// process killed with -9 frees its name after at most TTL. Renewed every
	// TTL/3.
	TTL time.Duration
	// Wait is how long AcquireLease waits for a taken lease to expire. It must
	// exceed TTL for a restart right after a kill -9 to succeed: a dead
	// holder's lease expires within TTL, a live one's never does.
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

// renew (and redisx.Release) act only while the key still holds this
// holder's token: a lease that expired and was taken by another must not be
// extended or deleted by its former holder.
var leaseRenewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)

// AcquireLease takes the lease on key, waiting up to opts.Wait for a holder that
// stopped renewing (a killed process) to let it expire. A holder that is
// still alive keeps it, and AcquireLease returns an error wrapping ErrLeaseHeld that
// names it.
func AcquireLease(ctx context.Context, rdb redis.UniversalClient, key string, opts LeaseOptions) (*Lease, error) {
	if opts.TTL < 100*time.Millisecond {
		return nil, fmt.Errorf("redisstream: lease TTL %s is below 100ms", opts.TTL)
	}
	token := holderToken()
	deadline := time.Now().Add(opts.Wait)
	poll := max(opts.TTL/10, 50*time.Millisecond)
	logged := false
	for {
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
		if !logged {
			opts.Log.Warn().Str("key", key).Str("holder", holder).Str("wait", opts.Wait.String()).
				Msg("lease taken; waiting for it to expire (a killed holder) or to be refused (a live one)")
			logged = true
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

// holderToken names this process in the key's value, so a refusal can say
// who holds the name, and is random so two holders never mistake each other.
func holderToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/pid-%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// renewLease renews the lease once (every third of its TTL, from
// AcquireLease), and takes it back if it lapsed while nobody else held it.
func (l *Lease) renewLease(ctx context.Context) {
	n, err := leaseRenewScript.Run(ctx, l.rdb, []string{l.key}, l.token, l.opts.TTL.Milliseconds()).Int()
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		// Transient: the next tick retries; the lease lasts TTL meanwhile.
		l.opts.Log.Warn().Err(err).Str("key", l.key).Msg("renewing the lease failed")
	case n == 0:
		// Gone (Redis restarted empty or failed over, or this process
		// stalled past TTL) and possibly taken. Take it back if nobody
		// holds it: then nothing is wrong and nothing need be done. Only
		// another holder is an operator's problem, said as such.
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

// Release stops renewing and frees the name at once, so a graceful restart
// need not wait for the TTL. Idempotent.
func (l *Lease) Release() error { return l.release() }
