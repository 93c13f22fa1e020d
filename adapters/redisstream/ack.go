package redisstream

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Ack acknowledges and deletes the deliveries' entries, per stream, in one
// round trip. Acking again is harmless. It works after Close.
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

// finish acknowledges and deletes entries, and lets go of them; where keys are sharded each stream
// gets a transaction of its own, all sent at once.
func (q *Queue) finish(ctx context.Context, refs []entryRef) error {
	txs := perStream(refs)
	if !q.perStream {
		txs = [][]streamIDs{slices.Concat(txs...)}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(txs))
	for i, tx := range txs {
		wg.Go(func() { errs[i] = q.ackTx(ctx, tx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err // what was acked is acked; acking it again is harmless
	}
	q.in.release(refs)
	return nil
}

// ackTx acknowledges and deletes chunks in one MULTI/EXEC (XACK, then ack.lua with the smallest and
// largest ID), so XLEN counts exactly the unfinished entries (Backlog and collect rely on it).
func (q *Queue) ackTx(ctx context.Context, chunks []streamIDs) error {
	pipe := q.rdb.TxPipeline()
	acks := make([]*redis.IntCmd, len(chunks))
	trims := make([]*redis.Cmd, len(chunks))
	for i, c := range chunks {
		acks[i] = pipe.XAck(ctx, c.key, q.opts.Group, c.ids...)
		trims[i] = ackScript.EvalSha(ctx, pipe, []string{c.key}, q.opts.Group, c.ids[0], c.ids[len(c.ids)-1])
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	// NOSCRIPT: the XACK is done; a crash before this retry leaves acked entries until a later trim.
	q.retryNoScript(ctx, ackScript, trims)
	for i := range chunks {
		if err := errors.Join(acks[i].Err(), trims[i].Err()); err != nil {
			return err
		}
	}
	// -1: the group was made anew and never delivered these IDs; they are deleted alone.
	pipe = q.rdb.Pipeline()
	for i, c := range chunks {
		if n, _ := trims[i].Int(); n < 0 {
			pipe.XDel(ctx, c.key, c.ids...)
		}
	}
	_, err := pipe.Exec(ctx) // nothing when there is nothing to delete
	return err
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

// ReasonUndecodable is the dead-letter reason of an entry without a valid order.
const ReasonUndecodable = "undecodable"

// DeadLetter writes each delivery to the dead-letter stream, then acks it: a crash in between repeats a
// record rather than loses it.
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

// setAsidePoison dead-letters an undecodable entry, finishes it, and logs it for an operator.
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
	if err := q.finish(ctx, []entryRef{{s.key, m.ID}}); err != nil {
		return fmt.Errorf("ack undecodable entry %s of %s after dead-lettering it: %w", m.ID, s.key, err)
	}
	q.opts.Log.Error().Err(cause).Str("stream", s.key).Str("entry", m.ID).Int("deliveries", attempts).
		Str("dead_letter", q.opts.DeadLetter).
		Msg("undecodable order entry moved to the dead-letter stream and acknowledged: inspect it there (XRANGE), fix its producer, and reconcile the voucher")
	return nil
}

// renew resets the idle time of the entries this process holds, so a batch retried through a database
// outage is not claimed, and lets go of those no longer pending to it.
func (q *Queue) renew(ctx context.Context) {
	refs := q.in.heldRefs()
	if len(refs) == 0 {
		return
	}
	chunks := slices.Concat(perStream(refs)...)
	calls := make([]scriptCall, len(chunks))
	for i, c := range chunks {
		args := append(make([]any, 0, 2+len(c.ids)), q.opts.Group, q.opts.Consumer)
		for _, id := range c.ids {
			args = append(args, id)
		}
		calls[i] = scriptCall{keys: []string{c.key}, args: args}
	}
	rctx, cancel := context.WithTimeout(ctx, q.renewEvery)
	defer cancel()
	cmds, err := q.runScripts(rctx, renewScript, calls)
	var lost []entryRef
	for i, c := range cmds {
		ids, _ := c.StringSlice() // none when the call failed
		for _, id := range ids {
			lost = append(lost, entryRef{chunks[i].key, id})
		}
	}
	q.in.release(lost)
	if err != nil && ctx.Err() == nil {
		q.opts.Log.Warn().Err(err).
			Msg("renewing the hold on in-flight order entries failed; if it lasts longer than MinIdle another consumer may take them over (harmless: writes are idempotent)")
	}
}

// every runs f once per period until ctx ends, then closes done.
func every(ctx context.Context, period time.Duration, done chan<- struct{}, f func(context.Context)) {
	defer close(done)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f(ctx)
	}
}

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

const scriptChunk = 500 // IDs per script call, so none holds Redis long or strains Lua's stack

type scriptCall struct {
	keys []string
	args []any
}

// streamIDs is at most scriptChunk entry IDs of one stream, ascending.
type streamIDs struct {
	key string
	ids []string
}

// perStream groups entries by stream, each stream's IDs sorted, in chunks of at most scriptChunk.
func perStream(refs []entryRef) [][]streamIDs {
	byStream := map[string][]string{}
	for _, r := range refs {
		byStream[r.stream] = append(byStream[r.stream], r.id)
	}
	out := make([][]streamIDs, 0, len(byStream))
	for key, ids := range byStream {
		if !slices.IsSortedFunc(ids, cmpID) {
			slices.SortFunc(ids, cmpID)
		}
		var chunks []streamIDs
		for c := range slices.Chunk(ids, scriptChunk) {
			chunks = append(chunks, streamIDs{key: key, ids: c})
		}
		out = append(out, chunks)
	}
	return out
}

// runScripts runs s for each call in one pipeline, and returns the commands in call order with the first error.
func (q *Queue) runScripts(ctx context.Context, s *redis.Script, calls []scriptCall) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(calls))
	pipe := q.rdb.Pipeline()
	for i, c := range calls {
		cmds[i] = s.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	q.retryNoScript(ctx, s, cmds)
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

// retryNoScript runs again the commands answered NOSCRIPT (a restart, a failover), replacing them in cmds.
func (q *Queue) retryNoScript(ctx context.Context, s *redis.Script, cmds []*redis.Cmd) {
	for i, c := range cmds {
		if redisx.IsNoScript(c.Err()) {
			cmds[i] = q.scripts.Retry(ctx, q.rdb, s, c)
		}
	}
}

// ErrLeaseHeld: another live holder kept renewing the lease for the whole wait.
var ErrLeaseHeld = errors.New("held by another live process")

// LeaseOptions of AcquireLease.
type LeaseOptions struct {
	TTL  time.Duration // how long the lease outlives its holder's last renewal (renewed every TTL/3)
	Wait time.Duration // for a taken lease to expire; above TTL, a restart right after a kill -9 succeeds
	Log  zerolog.Logger
}

// Lease on a consumer name keeps two live processes from sharing one pending list; held until Release.
type Lease struct {
	rdb     redis.UniversalClient
	key     string
	token   string
	opts    LeaseOptions
	release func() error
}

// Only while the key holds this holder's token: a lease taken by another is not extended.
var leaseRenewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)

// AcquireLease takes the lease on key, waiting up to opts.Wait for a holder that stopped renewing to let
// it expire; a live holder keeps it, and the error wraps ErrLeaseHeld and names it.
func AcquireLease(ctx context.Context, rdb redis.UniversalClient, key string, opts LeaseOptions) (*Lease, error) {
	if opts.TTL < 100*time.Millisecond {
		return nil, fmt.Errorf("redisstream: lease TTL %s is below 100ms", opts.TTL)
	}
	// The token names this process for a refusal to show, and is random so two holders never mix up.
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
		// Gone (Redis lost it, or this process stalled past TTL): only another holder is a problem.
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

// Release stops renewing and frees the name at once, so a restart need not wait. Idempotent.
func (l *Lease) Release() error { return l.release() }
