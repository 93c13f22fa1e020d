package infra

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/wire"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/redisstream"
	"github.com/hmdp-go/seckill/ports"
)

// provideStreamQueue first takes the consumer lease, so that the name is
// held before the queue reads under it, and released only after the queue is
// closed. The lease refuses a second live instance under the same
// SECKILL_CONSUMER: the two would share one pending list, each renewing and
// re-reading what the other is writing, and nothing would say so. Refused
// rather than made unique, because the name must stay stable across restarts
// (a restart re-reads its own pending entries at once) and a generated
// suffix would leave every restart's entries to wait MinIdle for a takeover.
// A killed instance stops renewing; its restart waits out the lease (logged)
// and then starts. The cleanup stops the queue's lease renewal if the service
// never ran (App.Shutdown closes it otherwise; Close is idempotent), then
// releases the name, so a graceful restart does not wait.
func provideStreamQueue(rdb redis.UniversalClient, c Config, log zerolog.Logger) (*redisstream.Queue, func(), error) {
	// How long a killed instance's name stays taken: a third of MinIdle
	// (within 1s..10s), so a restart under the same name waits at most
	// that, well before the others would take its entries over anyway.
	ttl := min(max(c.StreamMinIdle/3, time.Second), 10*time.Second)
	key := c.KeyPrefix + "consumer:" + c.Consumer
	ctx, cancel := context.WithTimeout(context.Background(), 3*ttl)
	defer cancel()
	lease, err := redisstream.AcquireLease(ctx, rdb, key, redisstream.LeaseOptions{
		TTL: ttl, Wait: ttl + ttl/2, Log: log.With().Str("component", "consumer-lease").Logger(),
	})
	if errors.Is(err, redisstream.ErrLeaseHeld) {
		return nil, nil, fmt.Errorf("SECKILL_CONSUMER=%q is in use by another running instance (%w); "+
			"give each instance its own stable name", c.Consumer, err)
	}
	if err != nil {
		return nil, nil, err
	}
	release := func() {
		if err := lease.Release(); err != nil {
			log.Warn().Err(err).Msg("consumer name not released; a restart under it waits for the lease to expire")
		}
	}
	q, err := redisstream.New(rdb, redisstream.Options{
		Prefix:   c.KeyPrefix,
		Group:    c.StreamGroup,
		Consumer: c.Consumer,
		Block:    c.StreamBlock,
		MinIdle:  c.StreamMinIdle,
		Linger:   c.BatchLinger,
		Log:      log.With().Str("component", "stream").Logger(),
	})
	if err != nil {
		release()
		return nil, nil, err
	}
	return q, func() {
		_ = q.Close()
		release()
	}, nil
}

// streamSet: the Redis Stream queue, shared by every instance as one group.
var streamSet = wire.NewSet(
	// The claim script also XADDs the order, so reservation and message are
	// one atomic step (a split voucher's, in the user's home bucket).
	redisstream.NewAdmission,
	wire.Bind(new(ports.Admission), new(*redisstream.Admission)),
	provideStreamQueue,
	provideObservedStreamQueue,
	wire.Bind(new(ports.QueueMonitor), new(*redisstream.Queue)),
)
