// Package redisgate is the Redis side of the claim path: the StockGate, whose
// admission check is one Lua script over keys of one hash tag (so it runs on
// Redis Cluster), and OrderIDs, leased from Redis in blocks. A voucher's stock
// lies in one bucket or K (docs/SCALING-buckets.md), moved by transfer.go.
package redisgate

import (
	"cmp"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

//go:embed *.lua
var luaFiles embed.FS

// places.lua's functions come first in every script that looks at a user's places.
var (
	claimScript       = redis.NewScript(lua("places.lua") + redisschema.OrderScript(lua("claim.lua"), "ARGV[2]", "ARGV[1]", "ARGV[3]"))
	bucketClaimScript = redis.NewScript(lua("places.lua") + redisschema.OrderScript(lua("bucket_claim.lua"), "ARGV[2]", "ARGV[1]", "ARGV[3]"))
	releaseScript     = redis.NewScript(lua("places.lua", "release.lua"))
	returnScript      = redis.NewScript(lua("places.lua", "return.lua"))
	healScript        = redis.NewScript(lua("places.lua", "heal.lua"))
	preheatScript     = redis.NewScript(lua("preheat.lua"))
	takeScript        = redis.NewScript(lua("take.lua"))
	applyScript       = redis.NewScript(lua("apply.lua"))
	writeScript       = redis.NewScript(lua("write.lua"))
	freezeScript      = redis.NewScript(lua("freeze.lua"))
)

func lua(names ...string) string {
	var src []byte
	for _, n := range names {
		b, err := luaFiles.ReadFile(n)
		if err != nil {
			panic(err)
		}
		src = append(src, b...)
	}
	return string(src)
}

const (
	claimOK = "ok" // the claim script's answer for a reservation; others are refusal codes
	// restoreChunk bounds one HSET of staged buyers and one page of a stream;
	// restorePipeline bounds a round trip.
	restoreChunk    = 1000
	restorePipeline = 16
	stagingTTL      = 10 * time.Minute // reclaims the staging hash of a Restore that died
	// minIndexTTL keeps an index entry long past its order reaching the database.
	minIndexTTL = 48 * time.Hour
	// sweeps bounds how often a claim whose home is empty visits every other
	// bucket while units are in flight, before it answers busy.
	sweeps = 4
)

// Options configures a Gate.
type Options struct {
	// Prefix starts every key (default "seckill:"); it must not contain '{' or '}'.
	Prefix string
	// Retention is how long after the sale ends its keys expire (default 24h).
	Retention time.Duration
	// Claims carries the claim script and its index write, typically the
	// client's AutoPipeliner (redisx.Do); nil means the client given to New.
	Claims redis.UniversalClient
	// WaitReplicas > 0: a claim answers only once that many replicas acknowledged
	// its writes (WAIT, within WaitTimeout), else ErrNotReplicated, outcome unknown.
	WaitReplicas int
	WaitTimeout  time.Duration
	// ReclaimAfterCancel: a cancelled order's Return frees its buyer's place.
	// Off, the place is forfeited: the unit returns, the buyer stays marked.
	ReclaimAfterCancel bool
	// Unsplit sells every voucher as one bucket, whatever its K (only the
	// Stream queue reads a split voucher's per-bucket streams).
	Unsplit bool
	// ApplyDeadline is how long after taking units a claim may still apply
	// them (default 2s); Skew bounds two masters' clock difference (500ms).
	ApplyDeadline, Skew time.Duration
	// Vouchers and Orders, when set, are read again by a restore after it
	// counted Redis, so the database's numbers are never the older.
	Vouchers ports.VoucherRepository
	Orders   ports.OrderRepository
	// Unreturned, when set, lists cancelled orders whose units the gate was
	// not given back yet: a split restore gives back those of kept buckets.
	Unreturned func(ctx context.Context, limit int) ([]domain.VoucherOrder, error)
	// Fault, for tests only: called after transfer steps "taken" and "applied"
	// and a split restore's "written"; an error stops there, as a crash would.
	Fault func(step string) error
}

// Defaults of Options.
const (
	DefaultRetention     = 24 * time.Hour
	DefaultApplyDeadline = 2 * time.Second
	DefaultSkew          = 500 * time.Millisecond
)

// Gate is the StockGate over Redis.
type Gate struct {
	rdb, claims         redis.UniversalClient
	scripts             *redisx.Set
	prefix              string
	opts                Options
	retention, indexTTL any                    // ARGV[5] and the index entry's PX (ms), boxed once
	last                atomic.Pointer[layout] // a sale's claims are for one voucher
	layouts             sync.Map               // domain.VoucherID -> *layout
}

var (
	_ ports.StockGate    = (*Gate)(nil)
	_ ports.GateControls = (*Gate)(nil)
	_ ports.GateProbe    = (*Gate)(nil)
	_ ports.OrderIndex   = (*Gate)(nil)
	_ ports.QueueBacklog = (*Gate)(nil)
)

// New panics on a nil client or a prefix with a hash-tag brace (wiring mistakes).
func New(rdb redis.UniversalClient, opts Options) *Gate {
	if rdb == nil {
		panic("redisgate: New needs a non-nil Redis client")
	}
	opts.Prefix = cmp.Or(opts.Prefix, redisschema.DefaultPrefix)
	if err := redisschema.ValidatePrefix(opts.Prefix); err != nil {
		panic("redisgate: " + err.Error())
	}
	if opts.WaitReplicas < 0 {
		panic("redisgate: WaitReplicas must not be negative")
	}
	if opts.WaitReplicas > 0 && opts.WaitTimeout <= 0 {
		opts.WaitTimeout = 500 * time.Millisecond
	}
	opts.Retention = cmp.Or(max(opts.Retention, 0), DefaultRetention)
	opts.ApplyDeadline = cmp.Or(max(opts.ApplyDeadline, 0), DefaultApplyDeadline)
	opts.Skew = cmp.Or(max(opts.Skew, 0), DefaultSkew)
	opts.Claims = cmp.Or(opts.Claims, rdb)
	if opts.Fault == nil {
		opts.Fault = func(string) error { return nil }
	}
	return &Gate{rdb: rdb, claims: opts.Claims, prefix: opts.Prefix, opts: opts,
		retention: opts.Retention.Milliseconds(), indexTTL: max(opts.Retention, minIndexTTL).Milliseconds(),
		scripts: redisx.NewSet(rdb, claimScript, bucketClaimScript, releaseScript, preheatScript, returnScript,
			healScript, takeScript, applyScript, writeScript, freezeScript, raiseAddedScript, redisschema.ControlsScript)}
}

// LoadScripts loads the gate's scripts on every node, so the first claims run them by SHA.
func (g *Gate) LoadScripts(ctx context.Context) error {
	if err := g.scripts.Load(ctx); err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	return nil
}

func (g *Gate) expireAt(s domain.Sale) time.Time { return s.End().Add(g.opts.Retention) }

// Preheat writes the voucher's gate only where it has none, never over one that
// may hold reservations. The live-set entry is written first (no claim on a
// voucher the consumers do not know) and again after (a prune may have removed it).
func (g *Gate) Preheat(ctx context.Context, v domain.Voucher) error {
	if err := v.CheckGateable(); err != nil {
		return fmt.Errorf("preheat: %w", err)
	}
	l := g.known(v.ID(), g.kOf(v))
	if err := g.announce(ctx, v, l); err != nil {
		return fmt.Errorf("preheat: %w", err)
	}
	if l.k > 1 {
		if err := g.preheatSplit(ctx, v, l); err != nil {
			return err
		}
	} else {
		k, s := l.buckets[0], v.Sale()
		code, err := g.scripts.Run(ctx, g.rdb, preheatScript, []string{k.Voucher, k.Buyers},
			s.Stock(), s.Begin().UnixMilli(), s.End().UnixMilli(), g.expireAt(s).UnixMilli(), s.LimitPerUser()).Int64()
		if err != nil {
			return fmt.Errorf("preheat voucher %d: %w", v.ID(), err)
		}
		if code == -1 {
			return anotherSale(v.ID())
		}
	}
	if err := g.addLive(ctx, l); err != nil {
		return fmt.Errorf("preheat: %w", err)
	}
	return nil
}

// anotherSale: neither overwriting a gate that may hold claims nor serving it is right.
func anotherSale(id domain.VoucherID) error {
	return fmt.Errorf("preheat voucher %d: the gate holds another sale's window under this id "+
		"(was the database reset while Redis kept its keys?); run seckill reconcile --voucher %d --fix", id, id)
}

// Reserve runs the claim script without its XADD: the channel driver's
// Admission publishes the order itself.
func (g *Gate) Reserve(ctx context.Context, o domain.VoucherOrder) error {
	return g.claim(ctx, o, false)
}

// ReserveAndAppend runs the claim script with its XADD, so the reservation and
// the order message are one atomic step: the Stream driver's admission only.
func (g *Gate) ReserveAndAppend(ctx context.Context, o domain.VoucherOrder) error {
	return g.claim(ctx, o, true)
}

// Prefix is the gate's key prefix; the stream adapter checks it matches its own.
func (g *Gate) Prefix() string { return g.prefix }

// claim runs the claim script in the voucher's one bucket, or in the user's
// home bucket of a split voucher, moving units there when it is empty.
func (g *Gate) claim(ctx context.Context, o domain.VoucherOrder, appendOrder bool) error {
	l, err := g.layoutOf(ctx, o.VoucherID())
	if err != nil { // nothing was sent: the claim changed nothing
		return fmt.Errorf("claim %s: %w: %w", o, ports.ErrNotAdmitted, err)
	}
	if l.k > 1 {
		if !appendOrder {
			return fmt.Errorf("claim %s: a split voucher is sold through the Stream queue only", o)
		}
		h := redisschema.HomeBucket(o.UserID(), l.k)
		if done, err := g.claimHome(ctx, l, h, o, true); done {
			return err
		}
		return g.claimWithTransfers(ctx, o, l, h)
	}
	answer, err := g.claimIn(ctx, l, 0, o, appendOrder, true)
	if err != nil {
		return err
	}
	if answer == domain.ErrVoucherNotFound.Code() {
		g.forget(l)
	}
	return answerErr(answer, o)
}

// claimIn runs the claim script on bucket b and answers its answer. With index,
// the order's index entry (another slot) rides the same round trip whatever the
// answer: Queued checks the buyers too. With WaitReplicas an unconfirmed 'ok' is an error.
func (g *Gate) claimIn(ctx context.Context, l *layout, b int, o domain.VoucherOrder, appendOrder, index bool) (string, error) {
	run, entry := g.claimCmds(ctx, l, b, o, appendOrder)
	var wait *redis.IntCmd
	var err error
	switch {
	case g.opts.WaitReplicas > 0:
		if index {
			redisx.Send(ctx, g.claims, entry)
		}
		run, wait, err = g.runReplicated(ctx, l.buckets[b].Voucher, l.script, run)
	case index:
		err = redisx.Do(ctx, g.claims, run, entry)
	default:
		err = redisx.Do(ctx, g.claims, run)
	}
	if err != nil { // out of time: the script may still run, so the outcome is unknown
		return "", fmt.Errorf("claim script for %s: %w", o, err)
	}
	if wait == nil && redisx.IsNoScript(run.Err()) { // Redis lost its scripts (restart, SCRIPT FLUSH)
		run = g.scripts.Retry(ctx, g.claims, l.script, run)
	}
	answer, err := run.Text()
	if err != nil {
		if redisx.NoReplicas(err) { // refused at its first write: nothing was taken
			return "", fmt.Errorf("claim script for %s: %w: %w", o, ports.ErrNotAdmitted, err)
		}
		return "", fmt.Errorf("claim script for %s: %w", o, err)
	}
	if wait != nil && answer == claimOK {
		if err := redisx.Replicated(wait, g.opts.WaitReplicas, g.opts.WaitTimeout); err != nil {
			return "", fmt.Errorf("claim %s: %w", o, err)
		}
	}
	return answer, nil
}

// answerErr maps the claim script's answer to the claim's result.
func answerErr(answer string, o domain.VoucherOrder) error {
	switch answer {
	case claimOK:
		return nil
	case "busy":
		return fmt.Errorf("%w: voucher %d's buckets are being restored", ports.ErrNotAdmitted, o.VoucherID())
	case "empty":
		return domain.ErrSoldOut
	}
	if r, ok := domain.RefusalByCode(answer); ok {
		return r
	}
	return fmt.Errorf("claim script for %s: unexpected answer %q", o, answer)
}

// Release leaves a stream entry in place: the stream consumer owns it.
func (g *Gate) Release(ctx context.Context, o domain.VoucherOrder, restoreStock bool) error {
	l, err := g.layoutOf(ctx, o.VoucherID())
	if err != nil {
		return fmt.Errorf("release %s: %w", o, err)
	}
	k := l.buckets[redisschema.HomeBucket(o.UserID(), l.k)]
	// Through the claim path's ordered pipeliner, so it runs after a late claim it undoes.
	n, err := g.scripts.Run(ctx, g.claims, releaseScript, []string{k.Voucher, k.Buyers},
		int64(o.UserID()), int64(o.ID()), boolArg(restoreStock)).Int64()
	if err != nil {
		return fmt.Errorf("release script for %s: %w", o, err)
	}
	if n < 0 {
		return fmt.Errorf("release %s: %w", o, errFrozen)
	}
	return nil
}

func randomToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails since Go 1.24
	return hex.EncodeToString(b)
}

// Apply runs controls.lua on each bucket and keeps a split voucher's K key as long.
// Added units all go to bucket 0, whose 'added' total makes a retry add nothing twice.
func (g *Gate) Apply(ctx context.Context, v domain.Voucher) error {
	if err := v.CheckGateable(); err != nil {
		return fmt.Errorf("apply controls: %w", err)
	}
	l := g.known(v.ID(), g.kOf(v))
	s := v.Sale()
	var frozen error
	for b, k := range l.buckets {
		n, err := g.scripts.Run(ctx, g.rdb, redisschema.ControlsScript, []string{k.Voucher, k.Buyers},
			s.End().UnixMilli(), g.expireAt(s).UnixMilli(), boolArg(s.Paused()), addedArg(s, b)).Int64()
		if err != nil {
			return fmt.Errorf("apply controls to voucher %d bucket %d: %w", v.ID(), b, err)
		}
		if n == -2 { // the other buckets still take the end and the pause
			frozen = fmt.Errorf("apply controls to voucher %d: bucket %d is being restored: the units added go on sale once it is done", v.ID(), b)
		}
	}
	if l.k > 1 {
		if err := g.rdb.PExpireAt(ctx, redisschema.BucketMeta(g.prefix, v.ID()), g.expireAt(s)).Err(); err != nil {
			return fmt.Errorf("apply controls to voucher %d: keep its K: %w", v.ID(), err)
		}
	}
	return frozen
}

// addedArg is bucket b's 'added': the total for bucket 0, none for the others.
func addedArg(s domain.Sale, b int) string {
	if b != 0 {
		return ""
	}
	return strconv.Itoa(s.Added())
}

// ErrNotReplicated: a claim ran on its master but too few replicas confirmed it in time.
var ErrNotReplicated = redisx.ErrNotReplicated

// runReplicated runs a script's command and a WAIT on one connection to key's
// master, loading the script there on NOSCRIPT (a just-promoted replica).
func (g *Gate) runReplicated(ctx context.Context, key string, script *redis.Script, run *redis.Cmd) (*redis.Cmd, *redis.IntCmd, error) {
	node, err := redisx.Master(ctx, g.rdb, key)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: find the master of %s: %w", ports.ErrNotAdmitted, key, err)
	}
	wait := redisx.DoReplicated(ctx, node, g.opts.WaitReplicas, g.opts.WaitTimeout, run)
	if redisx.IsNoScript(run.Err()) {
		if err := script.Load(ctx, node).Err(); err != nil {
			return nil, nil, fmt.Errorf("load after NOSCRIPT: %w", err)
		}
		run = redis.NewCmd(ctx, run.Args()...)
		wait = redisx.DoReplicated(ctx, node, g.opts.WaitReplicas, g.opts.WaitTimeout, run)
	}
	return run, wait, nil
}
