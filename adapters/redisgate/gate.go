// Package redisgate is the Redis side of the claim path: the StockGate, whose
// admission check (sale window, stock, one order per user, and in stream mode
// the order message) is one embedded Lua script, and OrderIDs, whose sequence
// is leased from Redis in blocks. Every key a script touches is passed in KEYS
// and shares the voucher's hash tag, so the same code runs on Redis Cluster.
package redisgate

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
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
	// The message the script appends: id ARGV[2], userId ARGV[1], voucherId ARGV[3].
	claimScript = redis.NewScript(redisschema.OrderScript(claimLua, "ARGV[2]", "ARGV[1]", "ARGV[3]"))

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed preheat.lua
	preheatLua    string
	preheatScript = redis.NewScript(preheatLua)

	//go:embed restore.lua
	restoreLua    string
	restoreScript = redis.NewScript(restoreLua)
)

// claimOK is the claim script's answer for a reservation; any other answer
// is a domain.Refusal's code.
const claimOK = "ok"

// DefaultRetention is how long a voucher's keys outlive its sale.
const DefaultRetention = 24 * time.Hour

const (
	// restoreChunk bounds one HSET while staging buyers, so no single command
	// holds Redis for long; restorePipeline bounds what one round trip carries.
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
	// trips (see redisbatch). Nil means the client given to New.
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
}

// Gate is the StockGate over Redis.
type Gate struct {
	rdb       redis.UniversalClient
	claims    redis.UniversalClient
	scripts   *redisscript.Set
	prefix    string
	retention time.Duration
	boxed     boxedArgs

	waitReplicas int
	waitTimeout  time.Duration
	reclaim      bool

	// last holds the key names of the voucher looked up last: a sale's
	// claims are for one voucher, and building its names on every claim
	// (six strings) cost about 1% of a claim's CPU.
	last atomic.Pointer[voucherKeys]
}

type voucherKeys struct {
	id   domain.VoucherID
	keys redisschema.Keys
	// claimHead is the claim command's arguments before the claim's own
	// (claimargs.go), boxed once.
	claimHead []any
}

var _ ports.StockGate = (*Gate)(nil)

// New panics on a nil client or a prefix with a hash-tag brace: both are
// wiring mistakes that must stop the process at start.
func New(rdb redis.UniversalClient, opts Options) *Gate {
	if rdb == nil {
		panic("redisgate: New needs a non-nil Redis client")
	}
	if opts.Prefix == "" {
		opts.Prefix = redisschema.DefaultPrefix
	}
	if err := redisschema.ValidatePrefix(opts.Prefix); err != nil {
		panic("redisgate: " + err.Error())
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.Claims == nil {
		opts.Claims = rdb
	}
	if opts.WaitReplicas < 0 {
		panic("redisgate: WaitReplicas must not be negative")
	}
	if opts.WaitReplicas > 0 && opts.WaitTimeout <= 0 {
		opts.WaitTimeout = 500 * time.Millisecond
	}
	return &Gate{rdb: rdb, claims: opts.Claims, prefix: opts.Prefix, retention: opts.Retention, boxed: boxArgs(opts.Retention),
		waitReplicas: opts.WaitReplicas, waitTimeout: opts.WaitTimeout, reclaim: opts.ReclaimAfterCancel,
		scripts: redisscript.NewSet(rdb, claimScript, releaseScript, preheatScript, restoreScript, returnScript)}
}

// LoadScripts loads the gate's scripts on every node, so the first claims
// run them by SHA; the service calls it at start.
func (g *Gate) LoadScripts(ctx context.Context) error {
	if err := g.scripts.Load(ctx); err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	return nil
}

func (g *Gate) keys(id domain.VoucherID) redisschema.Keys { return g.voucher(id).keys }

func (g *Gate) voucher(id domain.VoucherID) *voucherKeys {
	if l := g.last.Load(); l != nil && l.id == id {
		return l
	}
	k := redisschema.KeysFor(g.prefix, id)
	l := &voucherKeys{id: id, keys: k, claimHead: claimHead(k)}
	g.last.Store(l)
	return l
}

func (g *Gate) expireAt(s domain.Sale) time.Time { return s.End().Add(g.retention) }

func checkVoucher(v domain.Voucher) error {
	if v.ID() <= 0 {
		return fmt.Errorf("voucher has no id yet")
	}
	if !v.IsSeckill() {
		return fmt.Errorf("voucher %d is not a seckill voucher", v.ID())
	}
	return nil
}

// Preheat writes the voucher's gate only where it has none (preheat.lua):
// it never overwrites a gate that holds reservations, such as one a starting
// instance's Restore wrote a moment before.
//
// The live set is a different slot, so it cannot join the script. It is
// written first, so that no claim can succeed on a voucher the stream
// consumers do not know (a member without its voucher is harmless: Queued
// prunes it). It is written again after the gate, because a prune running
// between the two could have removed the member while the voucher hash did
// not exist yet (see prune); a failure of that second write leaves a gap the
// periodic restore closes.
func (g *Gate) Preheat(ctx context.Context, v domain.Voucher) error {
	if err := checkVoucher(v); err != nil {
		return fmt.Errorf("preheat: %w", err)
	}
	k := g.keys(v.ID())
	if err := g.addLive(ctx, k, v.ID()); err != nil {
		return fmt.Errorf("preheat voucher %d: %w", v.ID(), err)
	}
	s := v.Sale()
	code, err := g.scripts.Run(ctx, g.rdb, preheatScript, []string{k.Voucher, k.Buyers},
		s.Stock(), s.Begin().UnixMilli(), s.End().UnixMilli(), g.expireAt(s).UnixMilli()).Int64()
	if err != nil {
		return fmt.Errorf("preheat voucher %d: %w", v.ID(), err)
	}
	if code == -1 {
		// Neither overwriting (it may hold claims answered success) nor
		// serving this sale with another's window is right: an operator
		// decides, with `seckill reconcile --fix` once its queue is empty.
		return fmt.Errorf("preheat voucher %d: the gate holds another sale's window under this id "+
			"(was the database reset while Redis kept its keys?); run seckill reconcile --voucher %d --fix", v.ID(), v.ID())
	}
	if err := g.addLive(ctx, k, v.ID()); err != nil {
		return fmt.Errorf("preheat voucher %d: %w", v.ID(), err)
	}
	return nil
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

// claim runs the claim script and, in the same round trip, writes the
// order's index entry (redisschema.OrderIndexKey -> voucher and user), which lets Queued find
// a queued order in O(1) whatever the number of live sales. The entry cannot
// be written by the script (it lives outside the voucher's hash tag, so on a
// cluster in another slot), and is written whatever the script answers, so it
// costs no second round trip: an entry of a refused claim names a voucher
// whose buyers do not hold that ID, and Queued checks them.
func (g *Gate) claim(ctx context.Context, o domain.VoucherOrder, appendOrder bool) error {
	l := g.voucher(o.VoucherID())
	run, index := g.claimCmds(ctx, l, o, appendOrder)
	if g.waitReplicas > 0 {
		return g.claimReplicated(ctx, o, l.keys.Voucher, run, index)
	}
	if err := redisbatch.Do(ctx, g.claims, run, index); err != nil {
		// Out of time: the script may still run, so the outcome is unknown.
		return fmt.Errorf("claim script for %s: %w", o, err)
	}
	if redisscript.IsNoScript(run.Err()) {
		// Redis lost its script cache (a restart, SCRIPT FLUSH): reloaded
		// once for every claim that met it.
		keys, args := claimKeysArgs(run)
		run = g.scripts.Retry(ctx, g.claims, claimScript, keys, args...)
	}
	return g.answer(o, run)
}

// answer reads the claim script's answer: nil for a reservation, the domain
// refusal it names, or an error.
func (g *Gate) answer(o domain.VoucherOrder, run *redis.Cmd) error {
	answer, err := run.Text()
	if err != nil {
		if redisbatch.NoReplicas(err) {
			return fmt.Errorf("claim script for %s: %w: %w", o, ports.ErrNotAdmitted, err)
		}
		return fmt.Errorf("claim script for %s: %w", o, err)
	}
	if answer != claimOK {
		if r, ok := domain.RefusalByCode(answer); ok {
			return r
		}
		return fmt.Errorf("claim script for %s: unexpected answer %q", o, answer)
	}
	// A failed index write is not worth failing a sold unit for: a status
	// query then answers not_found until the database has the order, as it
	// would for any query racing the claim's answer.
	return nil
}

// minIndexTTL keeps an order's index entry long past the moment its order
// reaches the database (seconds, or the length of an outage), after which the
// database answers for it.
const minIndexTTL = 48 * time.Hour

// Release leaves a stream entry written by Reserve in place: the stream
// consumer owns it, and the entry ID is not known here.
func (g *Gate) Release(ctx context.Context, o domain.VoucherOrder, restoreStock bool) error {
	k := g.keys(o.VoucherID())
	restore := "0"
	if restoreStock {
		restore = "1"
	}
	// Through the claim path's client: on the pipeliner's ordered stream a
	// release sent after a claim that ran out of time runs after it, and so
	// undoes it even when the claim reaches Redis late.
	err := g.scripts.Run(ctx, g.claims, releaseScript, []string{k.Voucher, k.Buyers},
		int64(o.UserID()), int64(o.ID()), restore).Err()
	if err != nil {
		return fmt.Errorf("release script for %s: %w", o, err)
	}
	return nil
}

// Restore first copies the buyers into a staging hash in chunks, then one
// script swaps it in together with the voucher hash only if the voucher hash
// is still absent. Writing the buyers straight into the live buyers hash
// would leave a half-written set behind a crash, and could mix with a
// concurrent Preheat; staging keeps the visible step atomic and O(1), however
// many buyers a sale has.
func (g *Gate) Restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) (bool, error) {
	return g.restore(ctx, v, buyers, false)
}

// Overwrite replaces the voucher's gate state with the database's, whatever
// the gate holds: stock = v's remaining stock, buyers = exactly these orders.
// It is `seckill reconcile --fix`; run it only while no claims are served, or
// a claim between the database read and the swap is forgotten.
func (g *Gate) Overwrite(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) error {
	_, err := g.restore(ctx, v, buyers, true)
	return err
}

func (g *Gate) restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder, force bool) (bool, error) {
	if err := checkVoucher(v); err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	marks, err := domain.BuyerMarks(v.ID(), buyers)
	if err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}

	k := g.keys(v.ID())
	if n, err := g.rdb.Exists(ctx, k.Voucher).Result(); err != nil {
		return false, fmt.Errorf("restore voucher %d: %w", v.ID(), err)
	} else if n == 1 && !force {
		// Cheap early answer for the common case; the script decides for real.
		return false, g.addLive(ctx, k, v.ID())
	}
	// The live-set entry goes first, as in Preheat: a restored gate must
	// never accept claims that no stream consumer will look for.
	if err := g.addLive(ctx, k, v.ID()); err != nil {
		return false, fmt.Errorf("restore voucher %d: %w", v.ID(), err)
	}
	staging := k.Staging(randomToken())
	if err := g.stage(ctx, staging, marks); err != nil {
		// Best effort: the TTL reclaims it otherwise.
		_ = g.rdb.Del(context.WithoutCancel(ctx), staging).Err()
		return false, fmt.Errorf("restore voucher %d: stage buyers: %w", v.ID(), err)
	}

	s := v.Sale()
	code, err := g.scripts.Run(ctx, g.rdb, restoreScript, []string{k.Voucher, k.Buyers, staging},
		s.Stock(), s.Begin().UnixMilli(), s.End().UnixMilli(), g.expireAt(s).UnixMilli(), len(marks), forceArg(force),
	).Int64()
	if err != nil {
		return false, fmt.Errorf("restore voucher %d: %w", v.ID(), err)
	}
	switch code {
	case 1, 0:
		return code == 1, g.addLive(ctx, k, v.ID())
	case -1:
		return false, fmt.Errorf("restore voucher %d: staged buyers expired before the swap", v.ID())
	}
	return false, fmt.Errorf("restore voucher %d: unexpected answer %d", v.ID(), code)
}

func forceArg(force bool) string {
	if force {
		return "1"
	}
	return "0"
}

func (g *Gate) stage(ctx context.Context, key string, marks map[domain.UserID]domain.OrderID) error {
	if len(marks) == 0 {
		return nil
	}
	args := make([]any, 0, 2*restoreChunk)
	pipe := g.rdb.Pipeline()
	first := true
	flushChunk := func() {
		pipe.HSet(ctx, key, args...)
		if first {
			pipe.PExpire(ctx, key, stagingTTL)
			first = false
		}
		args = make([]any, 0, 2*restoreChunk)
	}
	for u, id := range marks {
		args = append(args, int64(u), int64(id))
		if len(args) == 2*restoreChunk {
			flushChunk()
			if pipe.Len() >= restorePipeline {
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
		}
	}
	if len(args) > 0 {
		flushChunk()
	}
	if pipe.Len() > 0 {
		_, err := pipe.Exec(ctx)
		return err
	}
	return nil
}

func (g *Gate) addLive(ctx context.Context, k redisschema.Keys, id domain.VoucherID) error {
	if err := g.rdb.SAdd(ctx, k.Live, int64(id)).Err(); err != nil {
		return fmt.Errorf("add voucher %d to live set: %w", id, err)
	}
	return nil
}

var _ ports.GateProbe = (*Gate)(nil)

// Missing costs one pipelined round trip: an EXISTS of the voucher hash and a
// SISMEMBER of the live set per voucher. On a cluster go-redis splits the
// pipeline by node, still one round trip per master.
func (g *Gate) Missing(ctx context.Context, ids []domain.VoucherID) ([]domain.VoucherID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	live := redisschema.LiveSet(g.prefix)
	pipe := g.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(ids))
	member := make([]*redis.BoolCmd, len(ids))
	for i, id := range ids {
		exists[i] = pipe.Exists(ctx, g.keys(id).Voucher)
		member[i] = pipe.SIsMember(ctx, live, int64(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("probe %d vouchers: %w", len(ids), err)
	}
	var missing []domain.VoucherID
	for i, id := range ids {
		if exists[i].Val() == 0 || !member[i].Val() {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// Queued costs at most two commands whatever the number of live sales: the
// order's index entry names its voucher and user, and the voucher's buyers
// hash confirms the user still holds this order (a released or refused claim
// leaves an entry whose buyers do not). An unknown ID and another user's ID
// both stop after the first command, so neither the answer nor its timing
// tells them apart.
func (g *Gate) Queued(ctx context.Context, user domain.UserID, id domain.OrderID) (domain.VoucherOrder, bool, error) {
	raw, err := g.rdb.Get(ctx, redisschema.OrderIndexKey(g.prefix, id)).Result()
	if errors.Is(err, redis.Nil) {
		return domain.VoucherOrder{}, false, nil
	}
	if err != nil {
		return domain.VoucherOrder{}, false, fmt.Errorf("queued order %d: %w", id, err)
	}
	idx, ok := redisschema.DecodeOrderIndex(raw)
	if !ok || idx.User != user || idx.Buckets != 1 {
		return domain.VoucherOrder{}, false, nil
	}
	vid := idx.Voucher
	mark, err := g.rdb.HGet(ctx, g.keys(vid).Buyers, strconv.FormatInt(int64(user), 10)).Result()
	if errors.Is(err, redis.Nil) || (err == nil && mark != strconv.FormatInt(int64(id), 10)) {
		return domain.VoucherOrder{}, false, nil
	}
	if err != nil {
		return domain.VoucherOrder{}, false, fmt.Errorf("queued order %d: voucher %d: %w", id, vid, err)
	}
	o, err := domain.NewVoucherOrder(id, user, domain.VoucherID(vid))
	if err != nil {
		return domain.VoucherOrder{}, false, fmt.Errorf("queued order %d: %w", id, err)
	}
	return o, true, nil
}

// PruneLive removes from the live set the vouchers whose keys have all
// expired, and reports how many. The stream consumer discovers streams there,
// so the set must not grow with every sale ever made; the service runs this
// with its periodic gate check.
func (g *Gate) PruneLive(ctx context.Context) (int, error) {
	live := redisschema.LiveSet(g.prefix)
	members, err := g.rdb.SMembers(ctx, live).Result()
	if err != nil {
		return 0, fmt.Errorf("prune live set: %w", err)
	}
	vids := make([]domain.VoucherID, 0, len(members))
	checks := make([]*redis.IntCmd, 0, len(members))
	pipe := g.rdb.Pipeline()
	for _, m := range members {
		vid, err := strconv.ParseInt(m, 10, 64)
		if err != nil || vid <= 0 {
			continue
		}
		k := g.keys(domain.VoucherID(vid))
		vids = append(vids, domain.VoucherID(vid))
		checks = append(checks, pipe.Exists(ctx, k.Voucher, k.Orders))
	}
	if len(vids) == 0 {
		return 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("prune live set: %w", err)
	}
	var stale []domain.VoucherID
	for i, c := range checks {
		if c.Val() == 0 {
			stale = append(stale, vids[i])
		}
	}
	if len(stale) == 0 {
		return 0, nil
	}
	if err := g.prune(ctx, live, stale); err != nil {
		return 0, fmt.Errorf("prune live set: %w", err)
	}
	return len(stale), nil
}

// prune removes vouchers whose keys have all expired (their voucher hash and
// their order stream, which outlives the sale until its consumer is done).
// The set and the voucher keys live in different slots, so no script or MULTI
// can make "check, then remove" atomic. Instead it removes first and checks
// again: a Preheat or Restore that recreated the voucher meanwhile either
// finished its own SADD after our SREM, or wrote its voucher hash before our
// second check, which then puts the member back.
func (g *Gate) prune(ctx context.Context, live string, vids []domain.VoucherID) error {
	members := make([]any, len(vids))
	for i, v := range vids {
		members[i] = int64(v)
	}
	if err := g.rdb.SRem(ctx, live, members...).Err(); err != nil {
		return err
	}
	pipe := g.rdb.Pipeline()
	checks := make([]*redis.IntCmd, len(vids))
	for i, v := range vids {
		k := g.keys(v)
		checks[i] = pipe.Exists(ctx, k.Voucher, k.Orders)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	var back []any
	for i, c := range checks {
		if c.Val() > 0 {
			back = append(back, int64(vids[i]))
		}
	}
	if len(back) > 0 {
		return g.rdb.SAdd(ctx, live, back...).Err()
	}
	return nil
}

// Stock reports a voucher's remaining stock in the gate, and false when the
// gate does not hold the voucher. For reconciliation and tests.
func (g *Gate) Stock(ctx context.Context, id domain.VoucherID) (int, bool, error) {
	s, err := g.rdb.HGet(ctx, g.keys(id).Voucher, "stock").Int()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("stock of voucher %d: %w", id, err)
	}
	return s, true, nil
}

// Buyers returns every user marked as holding an order of the voucher, with
// that order's ID. For reconciliation and tests (it reads the whole hash).
func (g *Gate) Buyers(ctx context.Context, id domain.VoucherID) (map[domain.UserID]domain.OrderID, error) {
	raw, err := g.rdb.HGetAll(ctx, g.keys(id).Buyers).Result()
	if err != nil {
		return nil, fmt.Errorf("buyers of voucher %d: %w", id, err)
	}
	out := make(map[domain.UserID]domain.OrderID, len(raw))
	for u, o := range raw {
		if o == redisschema.ForfeitMark {
			continue // a cancelled order's buyer: no unit held
		}
		uid, err1 := strconv.ParseInt(u, 10, 64)
		oid, err2 := strconv.ParseInt(o, 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("buyers of voucher %d: bad mark %q=%q: %w", id, u, o, err)
		}
		out[domain.UserID(uid)] = domain.OrderID(oid)
	}
	return out, nil
}

func randomToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails since Go 1.24
	return hex.EncodeToString(b)
}
