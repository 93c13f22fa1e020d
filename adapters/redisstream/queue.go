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
//     UNIQUE(user_id, voucher_id)) turns it into a no-op. Delivery.Attempts is
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

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Trimming: a stream must not grow without bound, and trimming must never
// remove an entry that is pending or not yet delivered. Entries are deleted
// (XDEL) in the same script that acknowledges them (ack.lua), instead of an
// XTRIM MINID below the oldest unfinished entry: acks arrive out of order
// (several workers and instances, redeliveries), so MINID would need the
// oldest pending ID and the group's read position, read and acted on without
// a race; XDEL removes exactly what was just finished and nothing else. It
// also makes XLEN the number of unfinished entries, which Pending and the
// stream's garbage collection rely on. Memory comes back a radix-tree node
// (up to 100 entries) at a time, once all its entries are deleted, which
// suits entries finished roughly in the order they came. The price: the
// stream is a work queue owned by this one group; a second group reading it
// would lose what this one already finished.

var (
	//go:embed ack.lua
	ackLua    string
	ackScript = redis.NewScript(ackLua)

	//go:embed renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)

	//go:embed gc.lua
	gcLua    string
	gcScript = redis.NewScript(gcLua)
)

// Defaults of Options.
const (
	DefaultGroup   = "seckill"
	DefaultBlock   = 200 * time.Millisecond
	DefaultMinIdle = 30 * time.Second
)

// ReasonUndecodable is the dead-letter reason of an entry that does not carry
// a valid order.
const ReasonUndecodable = "undecodable"

const (
	// discoverEvery: how often the live set and the registry are read. A new
	// voucher's first orders wait at most this long (plus a Block) to be seen.
	discoverEvery = time.Second
	// collectEvery: how often finished streams of expired vouchers are deleted.
	collectEvery = 10 * time.Second
	// scriptChunk bounds the entry IDs one script call carries, so no call
	// holds Redis for long or strains Lua's stack.
	scriptChunk = 500
)

// Options configures a Queue. Zero values take the defaults.
type Options struct {
	// Prefix is the gate's key prefix, the same as redisgate.Options.Prefix
	// (default "seckill:").
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
	opts      Options
	registry  string // set of voucher IDs whose streams the group must watch
	live      string // the gate's set of preheated voucher IDs
	perStream bool   // one command per stream: on a cluster each is its own slot

	discoverEvery, collectEvery, renewEvery time.Duration

	// recv admits one Receive at a time; the holder owns the read state below.
	recv         chan struct{}
	streams      map[domain.VoucherID]*stream
	nextDiscover time.Time
	nextCollect  time.Time
	rotate       int
	// discoveredAfterClose: the one discovery a closed queue makes is done.
	discoveredAfterClose bool

	// mu guards what Publish, Ack, DeadLetter and the lease renewal share
	// with Receive.
	mu        sync.Mutex
	buf       []ports.Delivery          // read from Redis, not yet handed out
	held      map[string]entryRef       // by Ref: every entry read and not yet finished
	published map[domain.VoucherID]bool // streams Publish wrote, to read at once

	// closeMu orders Publish against Close: Publish holds it shared until its
	// entry is written and noted, so once Close returns every accepted order
	// is in a stream this Queue drains.
	closeMu   sync.RWMutex
	done      chan struct{} // closed by Close
	wake      chan struct{} // a Publish nudges a Receive waiting for its first stream
	stopRenew context.CancelFunc
	renewed   chan struct{} // closed when the renewal loop has stopped
}

var (
	_ ports.OrderQueue   = (*Queue)(nil)
	_ ports.QueueBacklog = (*Queue)(nil)
)

// stream is one voucher's order stream as this Queue reads it.
type stream struct {
	vid     domain.VoucherID
	key     string // the voucher's order stream
	voucher string // the voucher's gate hash: while it exists claims may append

	grouped bool   // the group is known to exist on the stream
	started bool   // the own-pending re-read was scheduled (once per Queue)
	history string // where the own-pending re-read goes on; "" when done

	claimFrom string // XAUTOCLAIM cursor
	nextClaim time.Time

	// After Close: the stream is read up to its last entry at that time.
	snapped bool
	drainTo string
	drained bool
}

// entryRef names one entry; its String is the Delivery.Ref.
type entryRef struct{ stream, id string }

func (r entryRef) String() string { return r.stream + "/" + r.id }

// parseRef splits at the last '/': entry IDs have none, stream keys may.
func parseRef(ref string) (entryRef, error) {
	i := strings.LastIndexByte(ref, '/')
	if i <= 0 || i == len(ref)-1 {
		return entryRef{}, fmt.Errorf("redisstream: %q is not a delivery of this queue", ref)
	}
	return entryRef{stream: ref[:i], id: ref[i+1:]}, nil
}

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
	if opts.DeadLetter == "" {
		opts.DeadLetter = opts.Prefix + "dead-letter"
	}

	q := &Queue{
		rdb:           rdb,
		opts:          opts,
		registry:      opts.Prefix + "streams",
		live:          redisschema.KeysFor(opts.Prefix, 0).Live,
		perStream:     shardsKeys(rdb),
		discoverEvery: discoverEvery,
		collectEvery:  collectEvery,
		// Three renewals per MinIdle: two may fail before a takeover is due.
		renewEvery: opts.MinIdle / 3,
		recv:       make(chan struct{}, 1),
		streams:    map[domain.VoucherID]*stream{},
		held:       map[string]entryRef{},
		published:  map[domain.VoucherID]bool{},
		done:       make(chan struct{}),
		wake:       make(chan struct{}, 1),
		renewed:    make(chan struct{}),
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

func (q *Queue) newStream(vid domain.VoucherID) *stream {
	k := redisschema.KeysFor(q.opts.Prefix, vid)
	return &stream{vid: vid, key: k.Orders, voucher: k.Voucher, claimFrom: "0-0"}
}

func (q *Queue) closed() bool {
	select {
	case <-q.done:
		return true
	default:
		return false
	}
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
	key := redisschema.KeysFor(q.opts.Prefix, vid).Orders
	if err := q.rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: redisschema.EncodeOrder(o)}).Err(); err != nil {
		return fmt.Errorf("publish %s: %w", o, err)
	}
	// This Queue reads the stream from its next Receive on, registered or not.
	q.mu.Lock()
	q.published[vid] = true
	q.mu.Unlock()
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

// Receive hands out up to max orders: first this consumer's own entries left
// pending from before (at start, and for each stream it finds), then entries
// other consumers abandoned for longer than MinIdle, then new ones, waiting
// for them one Block at a time. After Close it reads each stream no further
// than where the stream ended then, claims nothing, and then returns
// ports.ErrQueueClosed. Redis errors are returned as they are; an entry read
// but not handed out stays pending and comes back (buffered, re-read, or
// claimed after MinIdle), so an error never loses one.
func (q *Queue) Receive(ctx context.Context, max int) ([]ports.Delivery, error) {
	if max <= 0 {
		max = 1
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case q.recv <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-q.recv }()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if ds := q.take(max); len(ds) > 0 {
			return ds, nil
		}
		finished, err := q.fill(ctx, max)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		if finished {
			return nil, ports.ErrQueueClosed
		}
	}
}

// take hands out buffered deliveries, skipping any whose hold was lost to
// another consumer while they waited.
func (q *Queue) take(max int) []ports.Delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []ports.Delivery
	i := 0
	for ; i < len(q.buf) && len(out) < max; i++ {
		if _, ok := q.held[q.buf[i].Ref]; ok {
			out = append(out, q.buf[i])
		}
	}
	q.buf = q.buf[i:]
	if len(q.buf) == 0 {
		q.buf = nil
	}
	return out
}

// fill reads from Redis into the buffer, in order of precedence. finished
// reports that the queue is closed and nothing is left to hand out.
func (q *Queue) fill(ctx context.Context, max int) (finished bool, err error) {
	closed := q.closed()
	now := time.Now()
	// A closed queue looks for streams once more, so a graceful stop right
	// after a new voucher's first claims drains them too, and then takes on
	// no new streams.
	if (!closed && !now.Before(q.nextDiscover)) || (closed && !q.discoveredAfterClose) {
		if err := q.discover(ctx, now); err != nil {
			return false, err
		}
		q.discoveredAfterClose = closed
	}
	if err := q.adopt(ctx); err != nil {
		return false, err
	}
	if n, err := q.readOwnPending(ctx, max); err != nil || n > 0 {
		return false, err
	}
	if closed {
		return q.drain(ctx, max)
	}
	if n, err := q.claim(ctx, max, now); err != nil || n > 0 {
		return false, err
	}
	return false, q.readNew(ctx, max)
}

// sorted lists the streams by voucher, so reads are in a stable order.
func (q *Queue) sorted() []*stream {
	out := make([]*stream, 0, len(q.streams))
	for _, s := range q.streams {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].vid < out[j].vid })
	return out
}

func (q *Queue) grouped() []*stream {
	var out []*stream
	for _, s := range q.sorted() {
		if s.grouped {
			out = append(out, s)
		}
	}
	return out
}

// readOwnPending re-reads, from ID 0, the entries the group still counts as
// delivered to this consumer: what this consumer name held when its process
// stopped. It runs once for each stream this Queue takes on, before any new
// entry of it is read; it skips entries this process already holds.
func (q *Queue) readOwnPending(ctx context.Context, max int) (int, error) {
	for _, s := range q.sorted() {
		for s.grouped && s.history != "" {
			msgs, err := q.read(ctx, s, s.history, max)
			if isNoGroup(err) {
				// A group made anew has no pending entries of anyone.
				s.grouped, s.history = false, ""
				break
			}
			if err != nil {
				return 0, fmt.Errorf("re-read own pending entries of %s: %w", s.key, err)
			}
			if len(msgs) == 0 {
				s.history = ""
				break
			}
			n, err := q.accept(ctx, s, msgs, true)
			if err != nil {
				return 0, err
			}
			// Moved on only once accepted: after an error the same entries are
			// read again rather than left to the claimer.
			s.history = msgs[len(msgs)-1].ID
			if n > 0 {
				return n, nil
			}
		}
	}
	return 0, nil
}

// read is one non-blocking XREADGROUP of one stream from id.
func (q *Queue) read(ctx context.Context, s *stream, id string, count int) ([]redis.XMessage, error) {
	res, err := q.rdb.XReadGroup(ctx, q.readArgs([]string{s.key, id}, count, -1)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil || len(res) == 0 {
		return nil, err
	}
	return res[0].Messages, nil
}

// readArgs builds an XREADGROUP; block < 0 sends no BLOCK at all (go-redis
// sends BLOCK 0, forever, for a zero Block).
func (q *Queue) readArgs(streams []string, count int, block time.Duration) *redis.XReadGroupArgs {
	return &redis.XReadGroupArgs{
		Group:    q.opts.Group,
		Consumer: q.opts.Consumer,
		Streams:  streams,
		Count:    int64(count),
		Block:    block,
	}
}

// claim takes over entries other consumers (or this one, having lost them
// between read and hand-out) left idle longer than MinIdle. Each stream is
// scanned with a cursor; a full pass rests for ClaimInterval.
func (q *Queue) claim(ctx context.Context, max int, now time.Time) (int, error) {
	for _, s := range q.grouped() {
		if now.Before(s.nextClaim) {
			continue
		}
		msgs, next, err := q.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream:   s.key,
			Group:    q.opts.Group,
			Consumer: q.opts.Consumer,
			MinIdle:  q.opts.MinIdle,
			Start:    s.claimFrom,
			Count:    int64(max),
		}).Result()
		if isNoGroup(err) {
			s.grouped = false
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("claim idle entries of %s: %w", s.key, err)
		}
		if next == "" || next == "0-0" {
			s.claimFrom, s.nextClaim = "0-0", now.Add(q.opts.ClaimInterval)
		} else {
			s.claimFrom = next
		}
		if len(msgs) == 0 {
			continue
		}
		if n, err := q.accept(ctx, s, msgs, true); err != nil || n > 0 {
			return n, err
		}
	}
	return 0, nil
}

// readNew reads entries never delivered to the group, waiting up to one
// Block. On a single Redis one XREADGROUP names every stream and returns as
// soon as any has entries. Where keys are sharded, each stream is looked at
// on its own without waiting, then one of them, in turn, is waited on: a new
// entry on another stream is then seen within one Block.
func (q *Queue) readNew(ctx context.Context, max int) error {
	ss := q.grouped()
	if len(ss) == 0 {
		q.idle(ctx)
		return nil
	}
	if !q.perStream || len(ss) == 1 {
		keys := make([]string, 0, 2*len(ss))
		for _, s := range ss {
			keys = append(keys, s.key)
		}
		for range ss {
			keys = append(keys, ">")
		}
		res, err := q.rdb.XReadGroup(ctx, q.readArgs(keys, max, q.opts.Block)).Result()
		return q.acceptNew(ctx, ss, res, err)
	}

	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.XStreamSliceCmd, len(ss))
	for i, s := range ss {
		cmds[i] = pipe.XReadGroup(ctx, q.readArgs([]string{s.key, ">"}, max, -1))
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	var got bool
	for i, c := range cmds {
		res, err := c.Result()
		got = got || len(res) > 0
		if err := q.acceptNew(ctx, ss[i:i+1], res, err); err != nil {
			return err
		}
	}
	if got {
		return nil
	}
	s := ss[q.rotate%len(ss)]
	q.rotate++
	res, err := q.rdb.XReadGroup(ctx, q.readArgs([]string{s.key, ">"}, max, q.opts.Block)).Result()
	return q.acceptNew(ctx, []*stream{s}, res, err)
}

func (q *Queue) acceptNew(ctx context.Context, ss []*stream, res []redis.XStream, err error) error {
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if isNoGroup(err) {
		// A stream or its group is gone (collected by another instance, or
		// deleted by hand). Look at the registry again and re-create groups
		// (BUSYGROUP is fine) before the next read.
		for _, s := range ss {
			s.grouped = false
		}
		q.nextDiscover = time.Time{}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read new order entries: %w", err)
	}
	byKey := make(map[string]*stream, len(ss))
	for _, s := range ss {
		byKey[s.key] = s
	}
	for _, r := range res {
		s := byKey[r.Stream]
		if s == nil || len(r.Messages) == 0 {
			continue
		}
		if _, err := q.accept(ctx, s, r.Messages, false); err != nil {
			return err
		}
	}
	return nil
}

// idle waits, with no stream to read, for a Publish, Close, ctx, the next
// discovery or one Block, whichever comes first.
func (q *Queue) idle(ctx context.Context) {
	d := min(q.opts.Block, time.Until(q.nextDiscover))
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-q.wake:
	case <-q.done:
	case <-ctx.Done():
	}
}

// drain reads, after Close, what each stream held when the queue was closed
// (a stream's end is taken the first time it is drained), so a graceful stop
// leaves nothing behind that was there, without chasing what other instances'
// claims keep appending. An entry past that end that one read returns anyway
// is handed out too: it is delivered to this consumer already.
func (q *Queue) drain(ctx context.Context, max int) (finished bool, err error) {
	var snap, todo []*stream
	for _, s := range q.grouped() {
		switch {
		case s.drained:
		case !s.snapped:
			snap = append(snap, s)
		default:
			todo = append(todo, s)
		}
	}
	if len(snap) > 0 {
		pipe := q.rdb.Pipeline()
		cmds := make([]*redis.XMessageSliceCmd, len(snap))
		for i, s := range snap {
			cmds[i] = pipe.XRevRangeN(ctx, s.key, "+", "-", 1)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return false, fmt.Errorf("find where order streams end: %w", err)
		}
		for i, s := range snap {
			s.snapped = true
			if last := cmds[i].Val(); len(last) > 0 {
				s.drainTo = last[0].ID
				todo = append(todo, s)
			} else {
				s.drained = true
			}
		}
	}
	if len(todo) == 0 {
		return true, nil
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.XStreamSliceCmd, len(todo))
	for i, s := range todo {
		cmds[i] = pipe.XReadGroup(ctx, q.readArgs([]string{s.key, ">"}, max, -1))
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	for i, s := range todo {
		res, err := cmds[i].Result()
		switch {
		case errors.Is(err, redis.Nil) || isNoGroup(err):
			s.drained = true
			continue
		case err != nil:
			return false, fmt.Errorf("drain %s: %w", s.key, err)
		}
		var msgs []redis.XMessage
		if len(res) > 0 {
			msgs = res[0].Messages
		}
		if len(msgs) == 0 || !idLess(msgs[len(msgs)-1].ID, s.drainTo) {
			s.drained = true
		}
		if len(msgs) > 0 {
			if _, err := q.accept(ctx, s, msgs, false); err != nil {
				return false, err
			}
		}
	}
	return false, nil
}

// accept takes read entries into this process: valid orders into the buffer
// (and held, so their hold is renewed until they are finished), undecodable
// ones to the dead letter. redelivered entries (own pending, claimed) get
// their delivery counts looked up; a first delivery counts 1. It reports how
// many entries it took.
func (q *Queue) accept(ctx context.Context, s *stream, msgs []redis.XMessage, redelivered bool) (int, error) {
	q.mu.Lock()
	fresh := make([]redis.XMessage, 0, len(msgs))
	for _, m := range msgs {
		// Already held (a re-read, or a claim of an entry whose renewal was
		// late): it is in the buffer or with a worker; do not hand it out twice.
		if _, ok := q.held[entryRef{s.key, m.ID}.String()]; !ok {
			fresh = append(fresh, m)
		}
	}
	q.mu.Unlock()
	if len(fresh) == 0 {
		return 0, nil
	}

	attempts := make([]int, len(fresh))
	for i := range attempts {
		attempts[i] = 1
	}
	if redelivered {
		var err error
		if fresh, attempts, err = q.deliveryCounts(ctx, s, fresh); err != nil {
			return 0, err
		}
	}

	var good []ports.Delivery
	type bad struct {
		msg      redis.XMessage
		attempts int
		err      error
	}
	var poison []bad
	for i, m := range fresh {
		o, err := redisschema.DecodeOrder(s.vid, m)
		if err != nil {
			poison = append(poison, bad{m, attempts[i], err})
			continue
		}
		good = append(good, ports.Delivery{Order: o, Ref: entryRef{s.key, m.ID}.String(), Attempts: attempts[i]})
	}
	// The good ones are held before the poison is dealt with, so an error
	// there cannot lose them.
	if len(good) > 0 {
		q.mu.Lock()
		for _, d := range good {
			r, _ := parseRef(d.Ref)
			q.held[d.Ref] = r
		}
		q.buf = append(q.buf, good...)
		q.mu.Unlock()
	}
	for _, p := range poison {
		if err := q.setAsidePoison(ctx, s, p.msg, p.attempts, p.err); err != nil {
			// It stays pending to this consumer and is claimed again after
			// MinIdle; the worker logs the error.
			return len(good), err
		}
	}
	return len(fresh), nil
}

// deliveryCounts looks up each entry's delivery count (XPENDING of that one
// ID, pipelined). Entries no longer pending (finished by another consumer
// meanwhile) are dropped.
func (q *Queue) deliveryCounts(ctx context.Context, s *stream, msgs []redis.XMessage) ([]redis.XMessage, []int, error) {
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.XPendingExtCmd, len(msgs))
	for i, m := range msgs {
		cmds[i] = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: s.key, Group: q.opts.Group, Start: m.ID, End: m.ID, Count: 1,
		})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, fmt.Errorf("delivery counts of %s: %w", s.key, err)
	}
	kept := msgs[:0:0]
	counts := make([]int, 0, len(msgs))
	for i, m := range msgs {
		p := cmds[i].Val()
		if len(p) == 0 || p[0].ID != m.ID {
			continue
		}
		kept = append(kept, m)
		counts = append(counts, int(p[0].RetryCount))
	}
	return kept, counts, nil
}

// setAsidePoison copies an undecodable entry to the dead letter, then
// finishes it, and says so in the log: an operator must look at its producer.
func (q *Queue) setAsidePoison(ctx context.Context, s *stream, m redis.XMessage, attempts int, cause error) error {
	values := []any{"reason", ReasonUndecodable, "stream", s.key, "entry", m.ID, "deliveries", attempts, "error", cause.Error()}
	for _, f := range redisschema.OrderFields {
		if v, ok := m.Values[f]; ok {
			values = append(values, f, fmt.Sprint(v))
		}
	}
	if err := q.rdb.XAdd(ctx, &redis.XAddArgs{Stream: q.opts.DeadLetter, Values: values}).Err(); err != nil {
		return fmt.Errorf("dead-letter undecodable entry %s of %s: %w", m.ID, s.key, err)
	}
	ref := entryRef{s.key, m.ID}
	if err := q.finish(ctx, []entryRef{ref}); err != nil {
		return fmt.Errorf("ack undecodable entry %s of %s after dead-lettering it: %w", m.ID, s.key, err)
	}
	q.opts.Log.Error().Err(cause).Str("stream", s.key).Str("entry", m.ID).Int("deliveries", attempts).
		Str("dead_letter", q.opts.DeadLetter).
		Msg("undecodable order entry moved to the dead-letter stream and acknowledged: inspect it there (XRANGE), fix its producer, and reconcile the voucher")
	return nil
}

// Ack finishes deliveries whose outcome is committed: their entries are
// acknowledged and deleted (see trimming), grouped per stream, in one
// pipelined round trip. Acking again is harmless. It works after Close.
func (q *Queue) Ack(ctx context.Context, ds []ports.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	refs, err := refsOf(ds)
	if err != nil {
		return err
	}
	if err := q.finish(ctx, refs); err != nil {
		return fmt.Errorf("ack %d order entries: %w", len(ds), err)
	}
	return nil
}

// DeadLetter writes each delivery to the dead-letter stream (fields id,
// userId, voucherId, reason, stream, entry, deliveries), then finishes it. The
// record is written before the ack, so a crash in between repeats it rather
// than loses it: an operator may see a record twice, never zero times.
func (q *Queue) DeadLetter(ctx context.Context, ds []ports.Delivery, reason domain.FailureReason) error {
	if len(ds) == 0 {
		return nil
	}
	refs, err := refsOf(ds)
	if err != nil {
		return err
	}
	pipe := q.rdb.Pipeline()
	for i, d := range ds {
		values := append(redisschema.EncodeOrder(d.Order),
			"reason", string(reason), "stream", refs[i].stream, "entry", refs[i].id, "deliveries", d.Attempts)
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: q.opts.DeadLetter, Values: values})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("dead-letter %d order entries: %w", len(ds), err)
	}
	if err := q.finish(ctx, refs); err != nil {
		return fmt.Errorf("ack %d dead-lettered order entries: %w", len(ds), err)
	}
	return nil
}

func refsOf(ds []ports.Delivery) ([]entryRef, error) {
	refs := make([]entryRef, len(ds))
	for i, d := range ds {
		r, err := parseRef(d.Ref)
		if err != nil {
			return nil, err
		}
		refs[i] = r
	}
	return refs, nil
}

// finish acknowledges and deletes entries (ack.lua), per stream, and lets go
// of them.
func (q *Queue) finish(ctx context.Context, refs []entryRef) error {
	var calls []scriptCall
	for key, ids := range byStream(refs) {
		for len(ids) > 0 {
			n := min(len(ids), scriptChunk)
			args := make([]any, 0, n+1)
			args = append(args, q.opts.Group)
			for _, id := range ids[:n] {
				args = append(args, id)
			}
			calls = append(calls, scriptCall{keys: []string{key}, args: args})
			ids = ids[n:]
		}
	}
	if _, err := runScripts(ctx, q.rdb, ackScript, calls); err != nil {
		return err
	}
	q.mu.Lock()
	for _, r := range refs {
		delete(q.held, r.String())
	}
	q.mu.Unlock()
	return nil
}

func byStream(refs []entryRef) map[string][]string {
	m := map[string][]string{}
	for _, r := range refs {
		m[r.stream] = append(m[r.stream], r.id)
	}
	return m
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

// Pending is how many entries of the voucher's stream are unfinished:
// delivered and not acknowledged, or not delivered yet. Finished entries are
// deleted with their ack, so it is the stream's length. For reconcile and
// tests.
func (q *Queue) Pending(ctx context.Context, vid domain.VoucherID) (int64, error) {
	n, err := q.rdb.XLen(ctx, redisschema.KeysFor(q.opts.Prefix, vid).Orders).Result()
	if err != nil {
		return 0, fmt.Errorf("pending entries of voucher %d: %w", vid, err)
	}
	return n, nil
}

// DeadLetters is how many records the dead-letter stream keeps.
func (q *Queue) DeadLetters(ctx context.Context) (int64, error) {
	n, err := q.rdb.XLen(ctx, q.opts.DeadLetter).Result()
	if err != nil {
		return 0, fmt.Errorf("dead-letter records: %w", err)
	}
	return n, nil
}

// idLess compares stream entry IDs ("<ms>-<seq>") numerically; an ID that
// does not parse sorts first.
func idLess(a, b string) bool {
	am, as := splitID(a)
	bm, bs := splitID(b)
	return am < bm || am == bm && as < bs
}

func splitID(id string) (uint64, uint64) {
	ms, seq, _ := strings.Cut(id, "-")
	m, _ := strconv.ParseUint(ms, 10, 64)
	s, _ := strconv.ParseUint(seq, 10, 64)
	return m, s
}

func isNoGroup(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOGROUP") }

func isBusyGroup(err error) bool { return err != nil && redis.HasErrorPrefix(err, "BUSYGROUP") }

// isReplyError tells an error Redis answered (a wrong key type, say) from a
// failure to reach it.
func isReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.Nil)
}
