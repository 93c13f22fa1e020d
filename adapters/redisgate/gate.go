// Package redisgate is the Redis side of the claim path: the StockGate, whose
// admission check (sale window, stock, one order per user, and in stream mode
// the order message) is one embedded Lua script, and OrderIDs, whose sequence
// is leased from Redis in blocks. Every key a script touches is passed in KEYS
// and shares one hash tag, so the same code runs on Redis Cluster.
//
// A voucher's stock lies in one or more buckets, each under its own hash tag
// (docs/SCALING-buckets.md). An unsplit voucher is the one bucket that never
// transfers, under the tag of its id; a voucher split into K buckets spreads
// its claims over K slots: a user's claims are decided by one bucket, the
// user's home, and units move between buckets by a three-step transfer whose
// records make a crash between two steps harmless (transfer.go).
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

// The gate's scripts, each from its .lua file (places.lua's functions come
// first in every script that looks at a user's places).
//
//go:embed *.lua
var luaFiles embed.FS

var (
	// The message the script appends: id ARGV[2], userId ARGV[1], voucherId ARGV[3].
	claimScript = redis.NewScript(lua("places.lua") + redisschema.OrderScript(lua("claim.lua"), "ARGV[2]", "ARGV[1]", "ARGV[3]"))
	// The same message, from the same arguments.
	bucketClaimScript = redis.NewScript(lua("places.lua") + redisschema.OrderScript(lua("bucket_claim.lua"), "ARGV[2]", "ARGV[1]", "ARGV[3]"))

	releaseScript = redis.NewScript(lua("places.lua", "release.lua"))
	returnScript  = redis.NewScript(lua("places.lua", "return.lua"))
	healScript    = redis.NewScript(lua("places.lua", "heal.lua"))
	preheatScript = redis.NewScript(lua("preheat.lua"))
	// A split voucher's transfers and restore.
	takeScript   = redis.NewScript(lua("take.lua"))
	applyScript  = redis.NewScript(lua("apply.lua"))
	writeScript  = redis.NewScript(lua("write.lua"))
	freezeScript = redis.NewScript(lua("freeze.lua"))
)

// lua is the named files' text, one after the other.
func lua(names ...string) string {
	var src []byte
	for _, n := range names {
		b, err := luaFiles.ReadFile(n)
		if err != nil {
			panic(err) // a name with no embedded file: a mistake in this list
		}
		src = append(src, b...)
	}
	return string(src)
}

// claimOK is the claim script's answer for a reservation; any other answer
// is a domain.Refusal's code.
const claimOK = "ok"

const (
	// restoreChunk bounds one HSET while staging buyers and one page of a
	// stream's orders, so no single command holds Redis for long;
	// restorePipeline bounds what one round trip carries.
	restoreChunk    = 1000
	restorePipeline = 16
	// stagingTTL reclaims the staging hash of a Restore that died half way.
	stagingTTL = 10 * time.Minute
)

// Options configures a Gate.
type Options struct {
	// Prefix starts every key (default "seckill:"); it must not contain '{' or '}'.
	Prefix string
	// Retention is how long after the sale ends its keys expire (default 24h).
	// A voucher preheated after end+Retention is gone at once: claims answer
	// not found rather than ended.
	Retention time.Duration
	// Claims carries the claim script and its index write: typically the
	// client's asynchronous AutoPipeliner, so concurrent claims share round
	// trips (see redisx.Do). Nil means the client given to New.
	Claims redis.UniversalClient
	// WaitReplicas > 0 makes a claim answer only after that many replicas
	// of its master acknowledged the claim's writes (Redis WAIT, within
	// WaitTimeout); unconfirmed, the claim fails with ErrNotReplicated and
	// its outcome is unknown (it may survive a failover, or not). 0 is off:
	// a claim is answered once its master has it, and a failover to a
	// replica that lagged can lose it.
	WaitReplicas int
	WaitTimeout  time.Duration
	// ReclaimAfterCancel: a cancelled or expired order's Return frees its
	// buyer's place, so the buyer may claim again. Off (the default), the
	// place is forfeited: the unit returns to the sale and the buyer stays
	// marked (with the forfeit mark), so a claim answers duplicate.
	ReclaimAfterCancel bool
	// Unsplit sells every voucher as one bucket, whatever its K: a split
	// voucher's buckets each append to their own stream, which only the
	// Stream queue reads, so the channel queue sells split vouchers whole
	// (K is a capacity choice; every guarantee is the same either way).
	Unsplit bool

	// Split vouchers' transfers and restore (docs/SCALING-buckets.md).
	//
	// ApplyDeadline is how long after taking units a claim may still apply
	// them to its home (step 2); past it the record is the repair's. It is
	// also how long a restore waits, plus Skew, before it counts (default 2s).
	ApplyDeadline time.Duration
	// Skew bounds the clock difference between two masters (default 500ms).
	Skew time.Duration
	// Vouchers and Orders, when set, are read again by a restore after it
	// has counted Redis (a split voucher's, after fencing its buckets), so
	// the database's numbers are never older than Redis's (an order
	// committed in between would otherwise be counted as still unsold).
	Vouchers ports.VoucherRepository
	Orders   ports.OrderRepository
	// Unreturned, when set, lists cancelled orders whose units the gate has
	// not been given back yet (ports.OrderLifecycle's): a split voucher's
	// restore gives back itself those of the buckets it keeps (restore.go).
	Unreturned func(ctx context.Context, limit int) ([]domain.VoucherOrder, error)
	// Fault, for tests only: called after transfer step 1 ("taken") and step 2
	// ("applied"), and after a split restore wrote its buckets ("written");
	// a non-nil error stops the claim or restore there, as a process killed
	// between the steps would.
	Fault func(step string) error
}

// Defaults of Options.
const (
	DefaultRetention     = 24 * time.Hour
	DefaultApplyDeadline = 2 * time.Second
	DefaultSkew          = 500 * time.Millisecond
)

// sweeps bounds how often a claim whose home is empty visits every other
// bucket while units are in flight elsewhere, before it answers busy.
const sweeps = 4

// Gate is the StockGate over Redis.
type Gate struct {
	rdb     redis.UniversalClient
	claims  redis.UniversalClient
	scripts *redisx.Set
	prefix  string
	opts    Options
	// The constant claim arguments, boxed once (claimargs.go): the
	// retention (ms, ARGV[5]) and the index entry's PX (ms).
	retention, indexTTL any

	// last holds the layout of the voucher looked up last: a sale's claims
	// are for one voucher, and building its names on every claim (six
	// strings) cost about 1% of a claim's CPU. layouts holds every
	// voucher's (layout.go).
	last    atomic.Pointer[layout]
	layouts sync.Map // domain.VoucherID -> *layout
}

var _ ports.StockGate = (*Gate)(nil)

// New panics on a nil client or a prefix with a hash-tag brace: both are
// wiring mistakes that must stop the process at start.
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
	// A duration not above 0 takes its default.
	opts.Retention = cmp.Or(max(opts.Retention, 0), DefaultRetention)
	opts.ApplyDeadline = cmp.Or(max(opts.ApplyDeadline, 0), DefaultApplyDeadline)
	opts.Skew = cmp.Or(max(opts.Skew, 0), DefaultSkew)
	opts.Claims = cmp.Or(opts.Claims, rdb)
	return &Gate{rdb: rdb, claims: opts.Claims, prefix: opts.Prefix, opts: opts,
		retention: opts.Retention.Milliseconds(), indexTTL: max(opts.Retention, minIndexTTL).Milliseconds(),
		scripts: redisx.NewSet(rdb, claimScript, bucketClaimScript, releaseScript, preheatScript, returnScript,
			healScript, takeScript, applyScript, writeScript, freezeScript, raiseAddedScript, redisschema.ControlsScript)}
}

// LoadScripts loads the gate's scripts on every node, so the first claims
// run them by SHA; the service calls it at start, once for every layout.
func (g *Gate) LoadScripts(ctx context.Context) error {
	if err := g.scripts.Load(ctx); err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	return nil
}

func (g *Gate) expireAt(s domain.Sale) time.Time { return s.End().Add(g.opts.Retention) }

// Preheat writes the voucher's gate only where it has none (preheat.lua; a
// split voucher's K and buckets: preheatSplit): it never overwrites a gate
// that holds reservations, such as one a starting instance's Restore wrote a
// moment before.
//
// The live set is a different slot, so it cannot join the script. It is
// written first, so that no claim can succeed on a voucher the stream
// consumers do not know (a member without its voucher is harmless: Queued
// prunes it). It is written again after the gate, because a prune running
// between the two could have removed the member while the voucher hash did
// not exist yet (see prune); a failure of that second write leaves a gap the
// periodic restore closes.
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

// anotherSale: neither overwriting a gate (it may hold claims answered
// success) nor serving this sale with another's window is right: an operator
// decides, with `seckill reconcile --fix` once its queue is empty.
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
// the order message on the voucher's stream (Keys.Orders) are one atomic
// step. It is the Stream driver's admission (redisstream.Admission); nothing
// else should call it, since only a stream consumer reads what it appends.
func (g *Gate) ReserveAndAppend(ctx context.Context, o domain.VoucherOrder) error {
	return g.claim(ctx, o, true)
}

// Prefix is the key prefix the gate was built with; the stream adapter checks
// it reads the streams this gate writes.
func (g *Gate) Prefix() string { return g.prefix }

// claim runs the claim script in the voucher's one bucket, or in the user's
// home bucket of a split voucher (claimHome, and claimWithTransfers, which
// moves units there when the home is empty).
func (g *Gate) claim(ctx context.Context, o domain.VoucherOrder, appendOrder bool) error {
	l, err := g.layoutOf(ctx, o.VoucherID())
	if err != nil {
		// Nothing was sent: the claim changed nothing.
		return fmt.Errorf("claim %s: %w: %w", o, ports.ErrNotAdmitted, err)
	}
	if l.k > 1 {
		if !appendOrder {
			return fmt.Errorf("claim %s: a split voucher is sold through the Stream queue only", o)
		}
		// The home bucket's script reserves and appends the order; when the
		// home is empty, units move there from the other buckets.
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

// claimIn runs the claim script on bucket b and answers what it answered.
// With index it writes, in the same round trip, the order's index entry
// (redisschema.OrderIndexKey -> voucher, user and K), which lets Queued find
// a queued order in O(1) whatever the number of live sales. The entry cannot
// be written by the script (it lives outside the voucher's hash tag, so on a
// cluster in another slot), and is written whatever the script answers, so it
// costs no second round trip: an entry of a refused claim names a voucher
// whose buyers do not hold that ID, and Queued checks them.
//
// With WaitReplicas, the script and a WAIT run on one connection to the
// bucket's master (runReplicated), so a claim pays a pooled connection of
// its own for the round trip; the index entry still rides the pipeliner. An
// 'ok' not confirmed by enough replicas in time is an error (the outcome is
// unknown: the master took it); refusals write nothing, so they need no
// confirmation.
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
	if err != nil {
		// Out of time: the script may still run, so the outcome is unknown.
		return "", fmt.Errorf("claim script for %s: %w", o, err)
	}
	if wait == nil && redisx.IsNoScript(run.Err()) {
		// Redis lost its script cache (a restart, SCRIPT FLUSH): reloaded
		// once for every claim that met it.
		keys, args := claimKeysArgs(run)
		run = g.scripts.Retry(ctx, g.claims, l.script, keys, args...)
	}
	answer, err := run.Text()
	if err != nil {
		if redisx.NoReplicas(err) {
			// Refused at its first write: nothing was taken.
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

// answerErr maps the claim script's answer to the claim's result: nil for a
// reservation, the domain refusal it names, or an error. A failed index
// write is not worth failing a sold unit for: a status query then answers
// not_found until the database has the order, as it would for any query
// racing the claim's answer.
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

// minIndexTTL keeps an order's index entry long past the moment its order
// reaches the database (seconds, or the length of an outage), after which the
// database answers for it.
const minIndexTTL = 48 * time.Hour

// Release leaves a stream entry written by Reserve in place: the stream
// consumer owns it, and the entry ID is not known here.
func (g *Gate) Release(ctx context.Context, o domain.VoucherOrder, restoreStock bool) error {
	l, err := g.layoutOf(ctx, o.VoucherID())
	if err != nil {
		return fmt.Errorf("release %s: %w", o, err)
	}
	k := l.buckets[redisschema.HomeBucket(o.UserID(), l.k)] // the bucket that holds the user's places
	// Through the claim path's client: on the pipeliner's ordered stream a
	// release sent after a claim that ran out of time runs after it, and so
	// undoes it even when the claim reaches Redis late.
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

var _ ports.GateControls = (*Gate)(nil)

// Apply runs redisschema's controls.lua on each of the voucher's buckets
// (one script each: each its own slot), where the claim script reads them on
// its next run, and keeps a split voucher's K key as long as its buckets.
// Added units all go to bucket 0, which alone keeps the total taken
// ('added'): claims whose home is empty take them from there by transfers,
// as any other unit. A bucket written before a failure keeps the change; the
// retry (or the repair) writes them all again, and adds nothing twice.
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
		if n == -2 {
			// The other buckets still take the end and the pause.
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

// addedArg is what bucket b's hash records of the units admins added: bucket
// 0 keeps the total (Apply), the others none.
func addedArg(s domain.Sale, b int) string {
	if b != 0 {
		return ""
	}
	return strconv.Itoa(s.Added())
}

// ErrNotReplicated: a claim ran on its master but fewer replicas than asked
// confirmed it in time; a failover now could lose it.
var ErrNotReplicated = redisx.ErrNotReplicated

// runReplicated runs a script's command and a WAIT on one connection to the
// master of key (redisx.DoReplicated), loading the script there once if the
// master lost it (a restart, or a replica just promoted that never loaded
// it). A master it cannot find was sent nothing: ports.ErrNotAdmitted.
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
