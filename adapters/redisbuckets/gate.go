// Package redisbuckets splits one hot voucher's stock into K buckets, each
// under its own hash tag on its own slot range (so on separate Redis Cluster
// masters), and keeps every guarantee of the unsplit gate: a user's claims are
// decided by one bucket, the user's home (stable hash of the user id mod K),
// whose script checks window, stock and one order per user and appends the
// order to the bucket's own stream atomically; when the home is empty, units
// move from another bucket by a three-step transfer whose records make a
// crash between two steps harmless (see transfer.go and
// docs/SCALING-buckets.md). K = 1 vouchers never reach this package.
package redisbuckets

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisbatch"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/adapters/redisscript"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var (
	//go:embed claim.lua
	claimLua string
	// The message the script appends: id ARGV[2], userId ARGV[1], voucherId ARGV[4].
	claimScript = redis.NewScript(redisschema.OrderScript(claimLua, "ARGV[2]", "ARGV[1]", "ARGV[4]"))
	//go:embed take.lua
	takeLua    string
	takeScript = redis.NewScript(takeLua)
	//go:embed apply.lua
	applyLua    string
	applyScript = redis.NewScript(applyLua)
	//go:embed write.lua
	writeLua    string
	writeScript = redis.NewScript(writeLua)
	//go:embed freeze.lua
	freezeLua    string
	freezeScript = redis.NewScript(freezeLua)
	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
)

// Defaults of Options.
const (
	DefaultRetention     = 24 * time.Hour
	DefaultApplyDeadline = 2 * time.Second
	DefaultSkew          = 500 * time.Millisecond
	DefaultSweeps        = 4
	minIndexTTL          = 48 * time.Hour
	stagingTTL           = 10 * time.Minute
	restoreChunk         = 1000
)

// Options configures a Gate.
type Options struct {
	// Prefix starts every key (default "seckill:"), as redisgate's.
	Prefix string
	// Retention is how long after the sale ends its keys expire (default 24h).
	Retention time.Duration
	// ApplyDeadline is how long after taking units a claim may still apply
	// them to its home (step 2); past it the record is the repair's. It is
	// also how long a restore waits, plus Skew, before it counts (default 2s).
	ApplyDeadline time.Duration
	// Skew bounds the clock difference between two masters (default 500ms).
	Skew time.Duration
	// Sweeps bounds how often a claim whose home is empty visits every other
	// bucket while units are in flight elsewhere, before it answers busy
	// (default 4).
	Sweeps int
	// Vouchers and Orders, when set, are read again by a restore after it
	// has fenced the buckets and counted Redis, so the database's numbers are
	// never older than Redis's (an order committed in between would
	// otherwise be counted as still unsold).
	Vouchers ports.VoucherRepository
	Orders   ports.OrderRepository
	// WaitReplicas > 0 answers a claim only once that many replicas of its
	// bucket's master confirmed it (Redis WAIT within WaitTimeout), as the
	// unsplit gate does (redisgate.Options.WaitReplicas).
	WaitReplicas int
	WaitTimeout  time.Duration
	// ReclaimAfterCancel: as redisgate.Options.ReclaimAfterCancel, for the
	// orders of split vouchers (ReturnOrder).
	ReclaimAfterCancel bool
	// Fault, for tests only: called after transfer step 1 ("taken") and step 2
	// ("applied"); a non-nil error stops the claim there, as a process
	// killed between the steps would.
	Fault func(step string) error
}

// Gate is the bucketed gate over Redis (a single node or a cluster).
type Gate struct {
	rdb    redis.UniversalClient
	prefix string
	opts   Options
	ks     sync.Map // domain.VoucherID -> int: K never changes for a voucher
	// scripts runs every script of the package, and reloads them all when
	// Redis lost them.
	scripts *redisscript.Set
}

// New panics on a nil client or a bad prefix: wiring mistakes.
func New(rdb redis.UniversalClient, opts Options) *Gate {
	if rdb == nil {
		panic("redisbuckets: New needs a non-nil Redis client")
	}
	if opts.Prefix == "" {
		opts.Prefix = redisschema.DefaultPrefix
	}
	if err := redisschema.ValidatePrefix(opts.Prefix); err != nil {
		panic("redisbuckets: " + err.Error())
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.WaitReplicas > 0 && opts.WaitTimeout <= 0 {
		opts.WaitTimeout = 500 * time.Millisecond
	}
	if opts.ApplyDeadline <= 0 {
		opts.ApplyDeadline = DefaultApplyDeadline
	}
	if opts.Skew <= 0 {
		opts.Skew = DefaultSkew
	}
	if opts.Sweeps <= 0 {
		opts.Sweeps = DefaultSweeps
	}
	return &Gate{rdb: rdb, prefix: opts.Prefix, opts: opts, scripts: redisscript.NewSet(rdb,
		claimScript, takeScript, applyScript, writeScript, freezeScript, releaseScript, redisschema.ControlsScript, raiseAddedScript)}
}

// LoadScripts loads the package's scripts on every node, so the first
// claims of a split voucher run them by SHA; the service calls it at start.
func (g *Gate) LoadScripts(ctx context.Context) error {
	if err := g.scripts.Load(ctx); err != nil {
		return fmt.Errorf("bucket gate: %w", err)
	}
	return nil
}

// Prefix is the key prefix; the stream queue must read the same.
func (g *Gate) Prefix() string { return g.prefix }

func (g *Gate) bucket(id domain.VoucherID, b, k int) redisschema.Keys {
	return redisschema.KeysForTag(g.prefix, redisschema.BucketTag(id, b, k))
}

func (g *Gate) expireAt(s domain.Sale) time.Time { return s.End().Add(g.opts.Retention) }

// split is bucket b's share of n units: as even as integers allow.
func split(n, b, k int) int {
	s := n / k
	if b < n%k {
		s++
	}
	return s
}

// Buckets is the voucher's K: 1 for a voucher that is not split (or that
// Redis does not hold). A K > 1 is cached for good: it never changes.
func (g *Gate) Buckets(ctx context.Context, id domain.VoucherID) (int, error) {
	if k, ok := g.ks.Load(id); ok {
		return k.(int), nil
	}
	k, err := g.rdb.Get(ctx, redisschema.BucketMeta(g.prefix, id)).Int()
	if errors.Is(err, redis.Nil) {
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("buckets of voucher %d: %w", id, err)
	}
	if k > 1 {
		g.ks.Store(id, k)
	}
	return k, nil
}

// cached is K when this process knows the voucher is split, else 0.
func (g *Gate) cached(id domain.VoucherID) int {
	if k, ok := g.ks.Load(id); ok {
		return k.(int)
	}
	return 0
}

func (g *Gate) setMeta(ctx context.Context, v domain.Voucher, k int) error {
	key := redisschema.BucketMeta(g.prefix, v.ID())
	ok, err := g.rdb.SetNX(ctx, key, k, 0).Result()
	if err != nil {
		return err
	}
	if !ok {
		cur, err := g.rdb.Get(ctx, key).Int()
		if err != nil {
			return err
		}
		if cur != k {
			return fmt.Errorf("voucher %d is split into %d buckets in Redis, not %d", v.ID(), cur, k)
		}
	}
	if err := g.rdb.PExpireAt(ctx, key, g.expireAt(v.Sale())).Err(); err != nil {
		return err
	}
	g.ks.Store(v.ID(), k)
	return nil
}

func (g *Gate) addLive(ctx context.Context, id domain.VoucherID, k int) error {
	members := make([]any, k)
	for b := range k {
		members[b] = redisschema.BucketTag(id, b, k)
	}
	if err := g.rdb.SAdd(ctx, redisschema.LiveSet(g.prefix), members...).Err(); err != nil {
		return fmt.Errorf("add voucher %d's buckets to the live set: %w", id, err)
	}
	return nil
}

func checkVoucher(v domain.Voucher, k int) error {
	if v.ID() <= 0 {
		return fmt.Errorf("voucher has no id yet")
	}
	if !v.IsSeckill() {
		return fmt.Errorf("voucher %d is not a seckill voucher", v.ID())
	}
	if k < 2 || k > redisschema.MaxBuckets {
		return fmt.Errorf("voucher %d: a split voucher has 2..%d buckets, not %d", v.ID(), redisschema.MaxBuckets, k)
	}
	return nil
}

// Preheat writes the voucher's K and its buckets, each with its share of the
// stock, only where a bucket is absent (as redisgate's Preheat, for the same
// reason: a bucket that exists may hold claims answered success). The live
// set names every bucket's tag before any bucket can sell, so the stream
// consumers look for every bucket's stream.
func (g *Gate) Preheat(ctx context.Context, v domain.Voucher, k int) error {
	if err := checkVoucher(v, k); err != nil {
		return fmt.Errorf("preheat: %w", err)
	}
	if err := g.setMeta(ctx, v, k); err != nil {
		return fmt.Errorf("preheat voucher %d: %w", v.ID(), err)
	}
	if err := g.addLive(ctx, v.ID(), k); err != nil {
		return fmt.Errorf("preheat: %w", err)
	}
	s := v.Sale()
	for b := range k {
		bk := g.bucket(v.ID(), b, k)
		code, err := g.scripts.Run(ctx, g.rdb, writeScript, []string{bk.Voucher, bk.Buyers, bk.Staging("none")},
			split(s.Stock(), b, k), s.Begin().UnixMilli(), s.End().UnixMilli(), g.expireAt(s).UnixMilli(), 0, "preheat",
			redisschema.Paused(s), addedArg(s, b)).Int()
		if err != nil {
			return fmt.Errorf("preheat voucher %d bucket %d: %w", v.ID(), b, err)
		}
		if code == -2 {
			return fmt.Errorf("preheat voucher %d bucket %d: the bucket holds another sale's window; run seckill reconcile --voucher %d --fix", v.ID(), b, v.ID())
		}
	}
	return nil
}

// Admit is the Stream driver's admission for a split voucher: the home
// bucket's script reserves and appends the order; when the home is empty it
// moves units from the other buckets and tries again (transfer.go).
func (g *Gate) Admit(ctx context.Context, o domain.VoucherOrder) error {
	k, err := g.Buckets(ctx, o.VoucherID())
	if err != nil {
		return err
	}
	if k < 2 {
		return domain.ErrVoucherNotFound
	}
	h := redisschema.HomeBucket(o.UserID(), k)
	home := g.bucket(o.VoucherID(), h, k)
	answer, err := g.claimOnce(ctx, home, o, true)
	if err != nil {
		return fmt.Errorf("%w (outcome unknown: if the script ran, the order is fulfilled)", err)
	}
	if answer != "empty" {
		return answerErr(answer, o)
	}
	return g.claimWithTransfers(ctx, o, k, h)
}

// answerErr maps the claim script's answer to Admit's result.
func answerErr(answer string, o domain.VoucherOrder) error {
	switch answer {
	case "ok":
		return nil
	case "busy":
		return fmt.Errorf("%w: voucher %d's buckets are being restored", ports.ErrNotAdmitted, o.VoucherID())
	case "empty":
		return domain.ErrSoldOut
	}
	if r, ok := domain.RefusalByCode(answer); ok {
		return r
	}
	return fmt.Errorf("bucket claim script for %s: unexpected answer %q", o, answer)
}

// claimOnce runs the claim script on one bucket; with index it also writes
// the order's index entry in the same round trip (as redisgate does, and in
// the same format, so status queries find queued orders of either kind).
func (g *Gate) claimOnce(ctx context.Context, bk redisschema.Keys, o domain.VoucherOrder, index bool) (string, error) {
	keys := []string{bk.Voucher, bk.Buyers, bk.Orders}
	args := []any{int64(o.UserID()), int64(o.ID()), g.opts.Retention.Milliseconds(), int64(o.VoucherID())}
	if g.opts.WaitReplicas > 0 {
		return g.claimReplicated(ctx, bk, o, index, keys, args)
	}
	pipe := g.rdb.Pipeline()
	run := pipe.EvalSha(ctx, claimScript.Hash(), keys, args...)
	if index {
		pipe.Set(ctx, redisschema.OrderIndexKey(g.prefix, o.ID()), redisschema.EncodeOrderIndex(o, g.cached(o.VoucherID())), max(g.opts.Retention, minIndexTTL))
	}
	_, _ = pipe.Exec(ctx)
	if redisscript.IsNoScript(run.Err()) {
		run = g.scripts.Retry(ctx, g.rdb, claimScript, keys, args...)
	}
	answer, err := run.Text()
	if err != nil {
		if redisbatch.NoReplicas(err) {
			// Refused at its first write: nothing was taken.
			return "", fmt.Errorf("bucket claim script for %s: %w: %w", o, ports.ErrNotAdmitted, err)
		}
		return "", fmt.Errorf("bucket claim script for %s: %w", o, err)
	}
	return answer, nil
}

// claimReplicated is claimOnce with a WAIT on the claim's own connection to
// the bucket's master: an 'ok' not confirmed by enough replicas in time is an
// error (the outcome is unknown: the master took it). Refusals and 'empty'
// write nothing, so they need no confirmation.
func (g *Gate) claimReplicated(ctx context.Context, bk redisschema.Keys, o domain.VoucherOrder, index bool, keys []string, args []any) (string, error) {
	if index {
		_ = g.rdb.Set(ctx, redisschema.OrderIndexKey(g.prefix, o.ID()), redisschema.EncodeOrderIndex(o, g.cached(o.VoucherID())), max(g.opts.Retention, minIndexTTL)).Err()
	}
	node, err := redisbatch.Master(ctx, g.rdb, bk.Voucher)
	if err != nil {
		return "", fmt.Errorf("bucket claim for %s: %w: find the bucket's master: %w", o, ports.ErrNotAdmitted, err)
	}
	run := redis.NewCmd(ctx, append([]any{"evalsha", claimScript.Hash(), len(keys), keys[0], keys[1], keys[2]}, args...)...)
	wait := redisbatch.DoReplicated(ctx, node, g.opts.WaitReplicas, g.opts.WaitTimeout, run)
	if redisscript.IsNoScript(run.Err()) {
		if err := claimScript.Load(ctx, node).Err(); err != nil {
			return "", fmt.Errorf("bucket claim script for %s: load after NOSCRIPT: %w", o, err)
		}
		run = redis.NewCmd(ctx, append([]any{"evalsha", claimScript.Hash(), len(keys), keys[0], keys[1], keys[2]}, args...)...)
		wait = redisbatch.DoReplicated(ctx, node, g.opts.WaitReplicas, g.opts.WaitTimeout, run)
	}
	answer, err := run.Text()
	if err != nil {
		if redisbatch.NoReplicas(err) {
			// Refused at its first write: nothing was taken.
			return "", fmt.Errorf("bucket claim script for %s: %w: %w", o, ports.ErrNotAdmitted, err)
		}
		return "", fmt.Errorf("bucket claim script for %s: %w", o, err)
	}
	if answer == "ok" {
		if err := redisbatch.Replicated(wait, g.opts.WaitReplicas, g.opts.WaitTimeout); err != nil {
			return "", fmt.Errorf("bucket claim %s: %w", o, err)
		}
	}
	return answer, nil
}
