// Package redisstream is the OrderQueue over Redis Streams: one stream per voucher (one slot, so it
// runs on Redis Cluster), appended by the gate's claim script atomically with the reservation, read by
// one consumer group with a stably named consumer per instance. Delivery is at least once (exactly once
// in effect): entries leave only through Ack or DeadLetter; a dead process's are re-read at its restart
// or claimed after MinIdle. Each voucher's entries come out in stream order. See docs/GUARANTEES.md.
package redisstream

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
	MaxLinger      = time.Second // bounds Options.Linger: a batching delay, well below MinIdle
)

const (
	discoverEvery = time.Second      // bounds how long a new voucher's first orders wait (plus a Block) to be seen
	collectEvery  = 10 * time.Second // finished streams of expired vouchers are deleted
)

// Options configures a Queue. Zero values take the defaults.
type Options struct {
	Prefix        string         // the gate's key prefix (default redisschema.DefaultPrefix)
	Group         string         // the consumer group (default "seckill")
	Consumer      string         // this instance's name in the group (required): unique, stable across restarts
	Block         time.Duration  // how long one XREADGROUP waits (default 200ms); Close is honoured within one Block
	MinIdle       time.Duration  // how long a dead consumer's entry waits before another claims it (default 30s)
	ClaimInterval time.Duration  // how often idle entries are looked for (default MinIdle/2)
	Linger        time.Duration  // how long a short read of new entries stays open for more (default 0; <= MaxLinger)
	DeadLetter    string         // the never-trimmed stream of entries set aside (default Prefix+"dead-letter")
	Log           zerolog.Logger // poison entries, failed renewals; default discarded
}

// Queue is safe for concurrent use. Receive calls are served one at a time.
type Queue struct {
	rdb       redis.UniversalClient
	scripts   *redisx.Set
	opts      Options
	registry  string // voucher IDs whose streams the group must watch
	live      string // the gate's set of preheated voucher IDs
	perStream bool   // one command per stream: on a cluster each is its own slot

	discoverEvery, collectEvery, renewEvery time.Duration

	recv chan struct{} // admits one Receive at a time; the holder owns rd
	rd   readState
	in   inflight

	// Publish holds closeMu shared until its entry is noted: once Close returns, Receive drains it.
	closeMu   sync.RWMutex
	done      chan struct{} // closed by Close
	wake      chan struct{} // a Publish nudges a Receive waiting for its first stream
	stopRenew context.CancelFunc
	renewed   chan struct{} // closed when the renewal loop has stopped

	after func(time.Duration) <-chan time.Time // a test holds a linger open
}

// readState belongs to the one running Receive; no lock guards it.
type readState struct {
	streams              map[string]*stream // by hash tag: a voucher's, or a bucket's
	nextDiscover         time.Time
	nextCollect          time.Time
	rotate               int  // sharded keys: which stream the next blocking read waits on
	discoveredAfterClose bool // the one discovery a closed queue makes is done
}

var (
	_ ports.OrderQueue   = (*Queue)(nil)
	_ ports.QueueMonitor = (*Queue)(nil)
	_ ports.Admission    = (*Admission)(nil)
)

// inflight is what this process took from Redis and has not finished, and what Publish tells Receive.
type inflight struct {
	mu        sync.Mutex
	buf       []buffered                // read from Redis, not yet handed out
	held      map[entryRef]struct{}     // every entry read and not yet finished
	published map[domain.VoucherID]bool // streams Publish wrote, to read at once
}

// buffered carries its entry so no Ref is parsed or built again.
type buffered struct {
	d   ports.Delivery
	ref entryRef
}

// notHeld keeps the messages this process does not hold yet, so none is handed out twice.
func (f *inflight) notHeld(key string, msgs []redis.XMessage) []redis.XMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(msgs), func(m redis.XMessage) bool {
		_, ok := f.held[entryRef{key, m.ID}]
		return ok
	})
}

func (f *inflight) hold(bs []buffered) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range bs {
		f.held[b.ref] = struct{}{}
	}
	f.buf = append(f.buf, bs...)
}

// take hands out buffered deliveries, skipping any whose hold was lost while they waited.
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

func (f *inflight) release(refs []entryRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range refs {
		delete(f.held, r)
	}
}

func (f *inflight) heldRefs() []entryRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Keys(f.held))
}

// keeps: this process holds entries of s, or published to it, so it reads s even when unregistered.
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

func (f *inflight) notePublished(vid domain.VoucherID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published[vid] = true
}

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
	case opts.Block < time.Millisecond: // BLOCK is in ms, and BLOCK 0 waits forever
		return nil, fmt.Errorf("redisstream: Block %s must be at least 1ms", opts.Block)
	case opts.MinIdle < 10*time.Millisecond:
		return nil, fmt.Errorf("redisstream: MinIdle %s must be at least 10ms", opts.MinIdle)
	case opts.ClaimInterval < 0:
		return nil, fmt.Errorf("redisstream: ClaimInterval %s must not be negative", opts.ClaimInterval)
	case opts.Linger < 0 || opts.Linger > MaxLinger:
		return nil, fmt.Errorf("redisstream: Linger %s must be within 0..%s", opts.Linger, MaxLinger)
	}
	_, cluster := rdb.(*redis.ClusterClient)
	_, ring := rdb.(*redis.Ring)
	q := &Queue{
		rdb:           rdb,
		scripts:       redisx.NewSet(rdb, ackScript, renewScript, gcScript),
		opts:          opts,
		registry:      redisschema.StreamRegistry(opts.Prefix),
		live:          redisschema.LiveSet(opts.Prefix),
		perStream:     cluster || ring, // keys of different tags may live on different nodes
		discoverEvery: discoverEvery,
		collectEvery:  collectEvery,
		renewEvery:    opts.MinIdle / 3, // two renewals may fail before a takeover is due
		recv:          make(chan struct{}, 1),
		rd:            readState{streams: map[string]*stream{}},
		in:            inflight{held: map[entryRef]struct{}{}, published: map[domain.VoucherID]bool{}},
		done:          make(chan struct{}),
		wake:          make(chan struct{}, 1),
		renewed:       make(chan struct{}),
		after:         time.After,
	}
	ctx, cancel := context.WithCancel(context.Background())
	q.stopRenew = cancel
	go every(ctx, q.renewEvery, q.renewed, q.renew)
	return q, nil
}

func (q *Queue) closed() bool {
	select {
	case <-q.done:
		return true
	default:
		return false
	}
}

// Close stops Publish and the renewal of held entries; Receive hands out what the streams held then and
// returns ports.ErrQueueClosed. Ack and DeadLetter go on working. Idempotent; always nil.
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

// Publish appends the order to its voucher's stream and registers the stream.
// There is no "full". An error does not prove the order was not enqueued.
func (q *Queue) Publish(ctx context.Context, o domain.VoucherOrder) error {
	q.closeMu.RLock()
	defer q.closeMu.RUnlock()
	if q.closed() {
		return ports.ErrQueueClosed
	}
	vid := o.VoucherID()
	key := redisschema.KeysFor(q.opts.Prefix, vid).Orders
	if err := q.rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: redisschema.EncodeOrder(o)}).Err(); err != nil {
		return fmt.Errorf("publish %s: %w", o, err)
	}
	q.in.notePublished(vid)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	// After the XADD, not pipelined with it, so collect's second look sees the stream.
	if err := q.rdb.SAdd(ctx, q.registry, int64(vid)).Err(); err != nil {
		return fmt.Errorf("publish %s: enqueued, but registering its stream failed: %w", o, err)
	}
	return nil
}

// Admission is the stream driver's ports.Admission: one script reserves and appends atomically.
type Admission struct {
	gate *redisgate.Gate
}

// NewAdmission takes the stream queue itself; it panics on a nil argument or a prefix mismatch.
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

// Overview counts the dead-letter records; the backlog is per voucher.
func (q *Queue) Overview(ctx context.Context) (ports.QueueOverview, error) {
	n, err := q.rdb.XLen(ctx, q.opts.DeadLetter).Result()
	if err != nil {
		return ports.QueueOverview{}, fmt.Errorf("dead-letter records: %w", err)
	}
	return ports.QueueOverview{Kind: "stream", Length: -1, DeadLetters: n}, nil
}

// Backlog reads in one round trip XLEN (acked entries are deleted), XPENDING, and the oldest entry's lag.
func (q *Queue) Backlog(ctx context.Context, vid domain.VoucherID) (ports.Backlog, error) {
	key := redisschema.KeysFor(q.opts.Prefix, vid).Orders
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
