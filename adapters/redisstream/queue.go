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
// Close is a graceful stop, the port's "drain" (see Queue.Close).
package redisstream

// The files of this package, one concern each: queue.go (options, the Queue
// and its lifecycle, the entries it holds, Publish and the Admission, the
// monitor), stream.go (one voucher's stream and its states), read.go
// (Receive: own leftovers, XAUTOCLAIM, new entries, the drain after Close),
// ack.go (finishing, dead-lettering and renewing held entries, and the
// scripts that do), discover.go (which streams exist), consumer_lease.go.
// The order message and the key layout are redisschema's.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/adapters/redisgate"
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

// inflight is what this process has taken from Redis and not finished, and
// what Publish tells Receive. Receive, Publish, Ack, DeadLetter and the lease
// renewal all reach it, so it is the one state under a lock.
type inflight struct {
	mu        sync.Mutex
	buf       []buffered                // read from Redis, not yet handed out
	held      map[entryRef]struct{}     // every entry read and not yet finished
	published map[domain.VoucherID]bool // streams Publish wrote, to read at once
}

// buffered is a delivery with its entry, so that no Ref is parsed or built
// again on the way out.
type buffered struct {
	d   ports.Delivery
	ref entryRef
}

func newInflight() inflight {
	return inflight{held: map[entryRef]struct{}{}, published: map[domain.VoucherID]bool{}}
}

// notHeld keeps the messages of stream key this process does not hold yet.
// One it holds (a re-read, or a claim of an entry whose renewal was late) is
// in the buffer or with a worker: it must not be handed out twice.
func (f *inflight) notHeld(key string, msgs []redis.XMessage) []redis.XMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(msgs), func(m redis.XMessage) bool {
		_, ok := f.held[entryRef{key, m.ID}]
		return ok
	})
}

// hold buffers deliveries to hand out and holds them until they are finished.
func (f *inflight) hold(bs []buffered) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range bs {
		f.held[b.ref] = struct{}{}
	}
	f.buf = append(f.buf, bs...)
}

// take hands out buffered deliveries, skipping any whose hold was lost to
// another consumer while they waited.
func (f *inflight) take(max int) []ports.Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ports.Delivery, 0, min(max, len(f.buf)))
	i := 0
	for ; i < len(f.buf) && len(out) < max; i++ {
		if _, ok := f.held[f.buf[i].ref]; ok {
			out = append(out, f.buf[i].d)
		}
	}
	f.buf = f.buf[i:]
	if len(f.buf) == 0 {
		f.buf = nil
	}
	return out
}

// release lets go of entries: finished, or no longer this consumer's.
func (f *inflight) release(refs []entryRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range refs {
		delete(f.held, r)
	}
}

// heldRefs lists every held entry.
func (f *inflight) heldRefs() []entryRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Keys(f.held))
}

// keeps tells whether this process has reason to read a stream the registry
// does not name: entries of it it holds, or a Publish to it not yet adopted.
func (f *inflight) keeps(s *stream) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.published[s.vid] {
		return true
	}
	for r := range f.held {
		if r.stream == s.key {
			return true
		}
	}
	return false
}

// notePublished marks a voucher's stream to be read from the next Receive on.
func (f *inflight) notePublished(vid domain.VoucherID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published[vid] = true
}

// takePublished hands Receive the streams published to since it last looked.
func (f *inflight) takePublished() map[domain.VoucherID]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	pub := f.published
	f.published = map[domain.VoucherID]bool{}
	return pub
}

// New validates opts and starts the renewal of held entries; Close stops it.
func New(rdb redis.UniversalClient, opts Options) (*Queue, error) {
	if rdb == nil {
		return nil, errors.New("redisstream: New needs a Redis client")
	}
	opts.Prefix = cmp.Or(opts.Prefix, redisschema.DefaultPrefix)
	if err := redisschema.ValidatePrefix(opts.Prefix); err != nil {
		return nil, fmt.Errorf("redisstream: %w", err)
	}
	opts.Group = cmp.Or(opts.Group, DefaultGroup)
	if opts.Consumer == "" {
		return nil, errors.New("redisstream: Options.Consumer is required: a name unique per instance and stable across restarts")
	}
	opts.Block = cmp.Or(opts.Block, DefaultBlock)
	opts.MinIdle = cmp.Or(opts.MinIdle, DefaultMinIdle)
	opts.ClaimInterval = cmp.Or(opts.ClaimInterval, opts.MinIdle/2)
	opts.DeadLetter = cmp.Or(opts.DeadLetter, redisschema.DeadLetter(opts.Prefix))
	switch {
	case opts.Block < time.Millisecond:
		// BLOCK is in milliseconds and BLOCK 0 waits forever.
		return nil, fmt.Errorf("redisstream: Block %s must be at least 1ms", opts.Block)
	case opts.MinIdle < 10*time.Millisecond:
		return nil, fmt.Errorf("redisstream: MinIdle %s must be at least 10ms", opts.MinIdle)
	case opts.ClaimInterval < 0:
		return nil, fmt.Errorf("redisstream: ClaimInterval %s must not be negative", opts.ClaimInterval)
	case opts.Linger < 0 || opts.Linger > MaxLinger:
		return nil, fmt.Errorf("redisstream: Linger %s must be within 0..%s", opts.Linger, MaxLinger)
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
	go every(ctx, q.renewEvery, q.renewed, q.renew)
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

// Close stops Publish and the renewal of held entries; Receive hands out
// what the streams held at that time, then returns ports.ErrQueueClosed.
// Ack and DeadLetter go on working, so the batch in flight can be finished;
// what is left unacked is re-read at the next start, or claimed by another
// instance after MinIdle (keep the shutdown deadline below it, or a batch
// still being written may be taken over: harmless, the writes are idempotent).
func (q *Queue) Close() error {
	q.closeMu.Lock()
	if q.closed() {
		q.closeMu.Unlock()
		return nil
	}
	close(q.done)
	q.closeMu.Unlock()
	q.stopRenew()
	<-q.renewed
	return nil
}

// Publish appends the order to its voucher's stream and registers the stream,
// so every consumer of the group finds it. There is no "full": a stream is
// bounded by Redis memory. As with any write over a network, an error does
// not prove the order was not enqueued; delivery is idempotent downstream.
func (q *Queue) Publish(ctx context.Context, o domain.VoucherOrder) error {
	q.closeMu.RLock()
	defer q.closeMu.RUnlock()
	if q.closed() {
		return ports.ErrQueueClosed
	}
	vid := o.VoucherID()
	key := q.keys(vid).Orders
	if err := q.rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: redisschema.EncodeOrder(o)}).Err(); err != nil {
		return fmt.Errorf("publish %s: %w", o, err)
	}
	// This Queue reads the stream from its next Receive on, registered or not.
	q.in.notePublished(vid)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	// Registered after the XADD, never before, so the garbage collection's
	// second look sees the stream (see collect). Two commands rather than one
	// pipeline: a cluster pipeline may run them on two nodes in either order.
	if err := q.rdb.SAdd(ctx, q.registry, int64(vid)).Err(); err != nil {
		return fmt.Errorf("publish %s: enqueued, but registering its stream failed: %w", o, err)
	}
	return nil
}

// Admission is the Stream driver's ports.Admission: one claim script decides
// window, stock and one-per-user, reserves, and appends the order to the
// voucher's stream, atomically. There is no second step to roll back.
//
// Its rule for an ambiguous answer (Redis failed without saying whether the
// script ran): leave it. Releasing could orphan a message that still becomes
// an order; if the script ran, the order is fulfilled and the user's retry
// answers duplicate; if it did not, nothing changed.
type Admission struct {
	gate *redisgate.Gate
}

var _ ports.Admission = (*Admission)(nil)

// NewAdmission takes the stream queue itself: the gate appends to the streams
// that this queue's consumer group reads, so wiring the stream admission
// without the stream queue does not compile, and a prefix mismatch (the gate
// writing streams the queue never reads) stops the process at start.
func NewAdmission(gate *redisgate.Gate, queue *Queue) *Admission {
	if gate == nil || queue == nil {
		panic("redisstream: NewAdmission needs a gate and a queue")
	}
	if gate.Prefix() != queue.opts.Prefix {
		panic(fmt.Sprintf("redisstream: the gate writes under %q but the queue reads %q", gate.Prefix(), queue.opts.Prefix))
	}
	return &Admission{gate: gate}
}

func (a *Admission) Admit(ctx context.Context, o domain.VoucherOrder) error {
	if err := a.gate.ReserveAndAppend(ctx, o); err != nil {
		if domain.IsRefusal(err) || errors.Is(err, ports.ErrNotAdmitted) {
			return err
		}
		return fmt.Errorf("%w (outcome unknown: if the script ran, the order is fulfilled)", err)
	}
	return nil
}

var _ ports.QueueMonitor = (*Queue)(nil)

// Overview counts the records the dead-letter stream keeps; the stream's
// backlog is per voucher.
func (q *Queue) Overview(ctx context.Context) (ports.QueueOverview, error) {
	n, err := q.rdb.XLen(ctx, q.opts.DeadLetter).Result()
	if err != nil {
		return ports.QueueOverview{}, fmt.Errorf("dead-letter records: %w", err)
	}
	return ports.QueueOverview{Kind: "stream", Length: -1, DeadLetters: n}, nil
}

// Backlog reads the voucher's stream in one round trip of three commands:
// XLEN (finished entries are deleted with their ack, so this is what is
// unfinished), the XPENDING summary of the group, and the oldest entry,
// whose ID holds the time it was added: its age is the fulfilment lag.
func (q *Queue) Backlog(ctx context.Context, vid domain.VoucherID) (ports.Backlog, error) {
	key := q.keys(vid).Orders
	pipe := q.rdb.Pipeline()
	xlen := pipe.XLen(ctx, key)
	pending := pipe.XPending(ctx, key, q.opts.Group)
	oldest := pipe.XRangeN(ctx, key, "-", "+", 1)
	_, _ = pipe.Exec(ctx) // each command's error is read below
	b := ports.Backlog{Known: true}
	var err error
	if b.Length, err = xlen.Result(); err != nil {
		return b, fmt.Errorf("backlog of voucher %d: %w", vid, err)
	}
	switch p, err := pending.Result(); {
	case isNoGroup(err) || (err != nil && strings.Contains(err.Error(), "no such key")):
		// No group yet: nothing was delivered.
	case err != nil:
		return b, fmt.Errorf("pending entries of voucher %d: %w", vid, err)
	default:
		b.Pending = p.Count
	}
	msgs, err := oldest.Result()
	if err != nil && err != redis.Nil {
		return b, fmt.Errorf("oldest entry of voucher %d: %w", vid, err)
	}
	if len(msgs) > 0 {
		if ms, _ := splitID(msgs[0].ID); ms > 0 {
			b.Lag = max(time.Since(time.UnixMilli(int64(ms))), 0)
		}
	}
	return b, nil
}
