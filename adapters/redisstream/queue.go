// Package redisstream is the OrderQueue over Redis Streams: one stream per
// voucher (redisschema.Keys.Orders), appended by the gate's claim script in the
// same atomic step as the reservation, and read by one consumer group in which
// every service instance is a consumer with a stable name.
//
// What it guarantees, given that the worker acks only after the MySQL commit:
//
//   - At least once. An entry leaves its stream only through Ack or
//     DeadLetter. A process that dies (kill -9, OOM, a lost host) loses
//     nothing: what it held stays pending in Redis; the same consumer name
//     re-reads it first at its next start, and any living instance claims it
//     (XAUTOCLAIM) once it has been idle longer than MinIdle.
//   - Exactly once in effect. Redelivery does happen (a crash between commit
//     and ack, a takeover); the idempotent batch write (order ID primary key,
//     the per-user places of the voucher) turns it into a no-op. Delivery.Attempts is
//     the entry's delivery count, so the worker can set aside an entry its
//     consumers keep dying on.
//   - Several instances share the group, and an entry goes to one living
//     consumer at a time: while a process holds entries (read and not yet
//     acked) it renews their idle time, so a batch that is merely slow (retried
//     through a database outage) is neither taken over nor counted again.
//   - Undecodable entries (poison) go to the dead-letter stream, are acked,
//     and do not stall the entries behind them.
//   - Entries of one voucher come out in stream order, new ones after the
//     consumer's own leftovers and claimed ones.
//
// What Redis itself keeps across its own crash is its persistence setting's
// guarantee (AOF with fsync), not this package's. XAUTOCLAIM needs Redis 6.2.
//
// Streams are per voucher so the claim script touches one hash-tag slot and
// runs on Redis Cluster. Consumers find streams in the gate's live set and
// keep their own registry (Prefix+"streams", voucher IDs), so a stream with
// unfinished entries is never forgotten after its voucher's gate keys expire.
// On a single Redis one XREADGROUP waits on all streams at once; with a
// ClusterClient (or Ring) every command names one stream, since the streams
// live in different slots.
//
// Close is a graceful stop: Publish is refused, Receive hands out what the
// streams held at that moment (the port's "drain"), never waits for more, and
// then returns ports.ErrQueueClosed; whatever is left is re-read at the next
// start. Ack and DeadLetter keep working for the batch in flight.
package redisstream

// The files of this package, one concern each: queue.go (options, the Queue
// and its lifecycle), stream.go (one voucher's stream and its states),
// publish.go, read.go (Receive and reading new entries), recover.go (own
// leftovers and XAUTOCLAIM), drain.go (Close), inflight.go (entries read and
// not finished), ack.go and renew.go (finishing and renewing them),
// deadletter.go, discover.go (which streams exist), scripts.go. The order
// message and the key layout are redisschema's.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Defaults of Options.
const (
	DefaultGroup   = "seckill"
	DefaultBlock   = 200 * time.Millisecond
	DefaultMinIdle = 30 * time.Second
	// MaxLinger bounds Options.Linger: a linger is a batching delay, well
	// below MinIdle and the lease renewal.
	MaxLinger = time.Second
)

const (
	// discoverEvery: how often the live set and the registry are read. A new
	// voucher's first orders wait at most this long (plus a Block) to be seen.
	discoverEvery = time.Second
	// collectEvery: how often finished streams of expired vouchers are deleted.
	collectEvery = 10 * time.Second
)

// Options configures a Queue. Zero values take the defaults.
type Options struct {
	// Prefix is the gate's key prefix, the same as redisgate.Options.Prefix
	// (default redisschema.DefaultPrefix).
	Prefix string
	// Group is the consumer group (default "seckill").
	Group string
	// Consumer names this instance in the group (required). It must be stable
	// across restarts, so a restarted instance re-reads what it left pending,
	// and unique per instance.
	Consumer string
	// Block is how long one XREADGROUP waits for new entries (default 200ms).
	// Close and a cancelled context are honoured within about one Block.
	Block time.Duration
	// MinIdle is how long an entry must sit unacknowledged by a dead
	// consumer before another one claims it (default 30s). Keep it well above
	// the p99 batch time; entries a living process holds are renewed anyway.
	MinIdle time.Duration
	// ClaimInterval is how often idle entries are looked for (default MinIdle/2).
	ClaimInterval time.Duration
	// Linger: a read of new entries that returned fewer than asked for
	// keeps its batch open for Linger, then reads what arrived meanwhile
	// into it, as the channel queue does (default 0: hand out at once). A
	// read that comes back full is handed out at once. At most MaxLinger.
	Linger time.Duration
	// DeadLetter is the stream that keeps entries set aside for an operator
	// (default Prefix+"dead-letter"). It is never trimmed.
	DeadLetter string
	// Log receives what an operator must act on (poison entries) and what
	// degrades silently otherwise (failed lease renewals). Default: discarded.
	Log zerolog.Logger
}

// Queue is safe for concurrent use. Receive calls are served one at a time.
type Queue struct {
	rdb       redis.UniversalClient
	scripts   *redisx.Set // ack.lua, renew.lua, gc.lua: loaded on a NOSCRIPT
	opts      Options
	registry  string // set of voucher IDs whose streams the group must watch
	live      string // the gate's set of preheated voucher IDs
	perStream bool   // one command per stream: on a cluster each is its own slot

	discoverEvery, collectEvery, renewEvery time.Duration

	// recv admits one Receive at a time; the holder owns rd.
	recv chan struct{}
	rd   readState

	// in is what Receive shares with Publish, Ack, DeadLetter and the lease
	// renewal; it has its own lock.
	in inflight

	// closeMu orders Publish against Close: Publish holds it shared until its
	// entry is written and noted, so once Close returns every accepted order
	// is in a stream this Queue drains.
	closeMu   sync.RWMutex
	done      chan struct{} // closed by Close
	wake      chan struct{} // a Publish nudges a Receive waiting for its first stream
	stopRenew context.CancelFunc
	renewed   chan struct{} // closed when the renewal loop has stopped

	// after is time.After; a test swaps it to hold a linger open.
	after func(time.Duration) <-chan time.Time
}

// readState is what the one running Receive works with; no lock guards it.
type readState struct {
	streams      map[string]*stream // by hash tag: a voucher's, or a bucket's
	nextDiscover time.Time
	nextCollect  time.Time
	rotate       int // where keys are sharded, which stream the next blocking read waits on
	// discoveredAfterClose: the one discovery a closed queue makes is done.
	discoveredAfterClose bool
}

var _ ports.OrderQueue = (*Queue)(nil)

// New validates opts and starts the renewal of held entries; Close stops it.
func New(rdb redis.UniversalClient, opts Options) (*Queue, error) {
	if rdb == nil {
		return nil, errors.New("redisstream: New needs a Redis client")
	}
	if opts.Prefix == "" {
		opts.Prefix = redisschema.DefaultPrefix
	}
	if err := redisschema.ValidatePrefix(opts.Prefix); err != nil {
		return nil, fmt.Errorf("redisstream: %w", err)
	}
	if opts.Group == "" {
		opts.Group = DefaultGroup
	}
	if opts.Consumer == "" {
		return nil, errors.New("redisstream: Options.Consumer is required: a name unique per instance and stable across restarts")
	}
	switch {
	case opts.Block == 0:
		opts.Block = DefaultBlock
	case opts.Block < time.Millisecond:
		// BLOCK is in milliseconds and BLOCK 0 waits forever.
		return nil, fmt.Errorf("redisstream: Block %s must be at least 1ms", opts.Block)
	}
	switch {
	case opts.MinIdle == 0:
		opts.MinIdle = DefaultMinIdle
	case opts.MinIdle < 10*time.Millisecond:
		return nil, fmt.Errorf("redisstream: MinIdle %s must be at least 10ms", opts.MinIdle)
	}
	switch {
	case opts.ClaimInterval == 0:
		opts.ClaimInterval = opts.MinIdle / 2
	case opts.ClaimInterval < 0:
		return nil, fmt.Errorf("redisstream: ClaimInterval %s must not be negative", opts.ClaimInterval)
	}
	if opts.Linger < 0 || opts.Linger > MaxLinger {
		return nil, fmt.Errorf("redisstream: Linger %s must be within 0..%s", opts.Linger, MaxLinger)
	}
	if opts.DeadLetter == "" {
		opts.DeadLetter = redisschema.DeadLetter(opts.Prefix)
	}

	q := &Queue{
		rdb:           rdb,
		scripts:       redisx.NewSet(rdb, ackScript, renewScript, gcScript),
		opts:          opts,
		registry:      redisschema.StreamRegistry(opts.Prefix),
		live:          redisschema.LiveSet(opts.Prefix),
		perStream:     shardsKeys(rdb),
		discoverEvery: discoverEvery,
		collectEvery:  collectEvery,
		// Three renewals per MinIdle: two may fail before a takeover is due.
		renewEvery: opts.MinIdle / 3,
		recv:       make(chan struct{}, 1),
		rd:         readState{streams: map[string]*stream{}},
		in:         newInflight(),
		done:       make(chan struct{}),
		wake:       make(chan struct{}, 1),
		renewed:    make(chan struct{}),
		after:      time.After,
	}
	ctx, cancel := context.WithCancel(context.Background())
	q.stopRenew = cancel
	go q.renewLoop(ctx)
	return q, nil
}

// shardsKeys tells whether keys of different hash tags may live on different
// nodes, where one command cannot name several streams.
func shardsKeys(rdb redis.UniversalClient) bool {
	switch rdb.(type) {
	case *redis.ClusterClient, *redis.Ring:
		return true
	}
	return false
}

func (q *Queue) keys(vid domain.VoucherID) redisschema.Keys {
	return redisschema.KeysFor(q.opts.Prefix, vid)
}

func (q *Queue) closed() bool {
	select {
	case <-q.done:
		return true
	default:
		return false
	}
}
