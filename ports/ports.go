// Package ports declares the interfaces the application needs from the outside
// world (Redis, the database, the queue, the clock). Adapters implement them;
// the application and its tests depend only on these.
package ports

import (
	"context"
	"errors"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

// Errors the application reacts to; any other adapter error is a transient failure.
var (
	ErrNotAdmitted  = errors.New("claim not admitted") // nothing changed; the client may retry. Wraps the cause.
	ErrQueueFull    = errors.New("order queue is full")
	ErrQueueClosed  = errors.New("order queue is closed")
	ErrUnknownToken = errors.New("unknown session token")
	ErrPermanent    = errors.New("refused for good by the database") // wraps a refusal no retry can fix, whatever the driver
)

// Clock tells the time; tests pass a fixed one.
type Clock interface{ Now() time.Time }

type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }

// OrderIDs issues order IDs that are unique across processes and restarts.
type OrderIDs interface {
	Next(ctx context.Context) (domain.OrderID, error)
	Unused(id domain.OrderID) // hands back an ID nobody wrote anywhere; Next may return it again
}

// Admission reserves a claim and hands its order to fulfilment.
type Admission interface {
	// Admit returns nil (the order ends created or failed exactly once), a *domain.Refusal or
	// ErrNotAdmitted (nothing changed), or any other error: the order may have been taken.
	Admit(ctx context.Context, o domain.VoucherOrder) error
}

// StockGate decides atomically, in front of the database, sale window, stock and orders per user.
type StockGate interface {
	// Preheat writes v with no buyers only when the gate holds nothing for v (never selling twice).
	Preheat(ctx context.Context, v domain.Voucher) error
	// Restore rebuilds v from the database's stock and buyers only if the gate has none.
	Restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) (bool, error)
	// Reserve takes one unit for the order's user, or changes nothing and returns a *domain.Refusal.
	Reserve(ctx context.Context, o domain.VoucherOrder) error
	// Release undoes exactly this order's mark (its unit too when restoreStock); idempotent.
	Release(ctx context.Context, o domain.VoucherOrder, restoreStock bool) error
	// Return is Release(o, true) for cancelled orders, remembered so GateProbe.Heal never puts o back.
	Return(ctx context.Context, orders []domain.VoucherOrder) error
	// Queued finds an order this gate reserved for user under id; its cost does not grow with the sales.
	Queued(ctx context.Context, user domain.UserID, id domain.OrderID) (domain.VoucherOrder, bool, error)
}

// OrderIndex finds a queued order by its ID alone (a payment notice names no user).
type OrderIndex interface {
	QueuedByID(ctx context.Context, id domain.OrderID) (domain.VoucherOrder, bool, error)
}

// GateProbe tells cheaply what the gate has lost, to repair it from the database.
type GateProbe interface {
	// Missing returns those of ids whose gate state or live-set entry is gone, in one round trip.
	Missing(ctx context.Context, ids []domain.VoucherID) ([]domain.VoucherID, error)
	// Counts returns, in one round trip, buyers marked and stock left for those of ids the gate holds.
	Counts(ctx context.Context, ids []domain.VoucherID) (map[domain.VoucherID]GateCount, error)
	// Heal marks v's committed orders whose user is unmarked (not Returned ones), taking a unit for
	// each while stock lasts, else counting it Oversold. It never removes a mark and is idempotent.
	Heal(ctx context.Context, v domain.Voucher, orders []domain.VoucherOrder) (Healed, error)
}

// GateCount is the gate's side of the cheap check that it lost writes.
type GateCount struct{ Buyers, Stock int }

// Healed is what one Heal put back.
type Healed struct {
	Restored int // marks put back (committed orders the gate had forgotten)
	Retaken  int // of those, the ones whose unit was taken off the gate's stock
	Oversold int // of those, the ones whose unit the gate had already sold again
}

func (h Healed) Add(o Healed) Healed {
	return Healed{Restored: h.Restored + o.Restored, Retaken: h.Retaken + o.Retaken, Oversold: h.Oversold + o.Oversold}
}

// GateAudit reads and repairs a voucher's gate state for an operator's reconcile.
type GateAudit interface {
	Stock(ctx context.Context, id domain.VoucherID) (int, bool, error) // and whether it has the voucher
	// Buyers maps each order a place holds to its user (a forfeited place holds none).
	Buyers(ctx context.Context, id domain.VoucherID) (map[domain.OrderID]domain.UserID, error)
	// Overwrite sets the gate to v's stock and exactly these buyers. Only safe while no claims are served.
	Overwrite(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) error
}

// QueueBacklog tells which of a voucher's orders a durable queue still holds.
type QueueBacklog interface {
	Pending(ctx context.Context, id domain.VoucherID) (int64, error)
	// Orders lists them oldest first from at most max entries, skipping invalid ones.
	Orders(ctx context.Context, id domain.VoucherID, max int) (orders []domain.VoucherOrder, complete bool, err error)
}

// Delivery is one order handed out by a queue.
type Delivery struct {
	Order    domain.VoucherOrder
	Ref      string // identifies it to Ack and in logs (a stream's key and entry ID)
	Attempts int
}

// OrderQueue carries claimed orders from the claim path to fulfilment.
type OrderQueue interface {
	// Publish enqueues without blocking, or returns ErrQueueFull (ErrQueueClosed after Close).
	Publish(ctx context.Context, o domain.VoucherOrder) error
	// Receive waits for 1..max orders in publish order; after Close, what is left, then ErrQueueClosed.
	// It returns ctx.Err() when ctx ends first.
	Receive(ctx context.Context, max int) ([]Delivery, error)
	Ack(ctx context.Context, ds []Delivery) error // their outcome is committed
	// DeadLetter sets aside for good deliveries recorded as failed (a no-op if it never redelivers).
	DeadLetter(ctx context.Context, ds []Delivery, reason domain.FailureReason) error
	Close() error // stops Publish; Receive goes on until drained
}

type Outcome = domain.Outcome

// OrderRepository is the source of truth for orders.
type OrderRepository interface {
	// CreateBatch records orders in one transaction, each created or failed exactly once, outcomes in
	// input order, stock never below zero. An error means nothing was committed.
	CreateBatch(ctx context.Context, orders []domain.VoucherOrder) ([]Outcome, error)
	// MarkFailed records orders without an outcome as failed; serialised with CreateBatch per voucher.
	MarkFailed(ctx context.Context, orders []domain.VoucherOrder, reason domain.FailureReason) ([]Outcome, error)
	Find(ctx context.Context, id domain.OrderID) (domain.OrderStatus, error) // or domain.ErrOrderNotFound
	// Buyers lists by id the orders holding their buyer's place (a unit, or Forfeited ones).
	Buyers(ctx context.Context, voucher domain.VoucherID) ([]domain.VoucherOrder, error)
	// BuyersAfter is Buyers in pages: at most limit, with ids above after.
	BuyersAfter(ctx context.Context, voucher domain.VoucherID, after domain.OrderID, limit int) ([]domain.VoucherOrder, error)
	// CountBuyers counts, in one query, each voucher's buyers as Buyers lists them.
	CountBuyers(ctx context.Context, vouchers []domain.VoucherID) (map[domain.VoucherID]int, error)
}

// Creation is what AddSeckillOnce did under an idempotency key.
type Creation struct {
	Voucher     domain.Voucher // the new one, or the one the key names (as Get returns it)
	Fingerprint string         // recorded with the key when it was first used
	Created     bool           // false: the key was used before and nothing was stored
}

// VoucherRepository stores vouchers and their sales.
type VoucherRepository interface {
	// AddSeckill stores v and returns it with its ID, recording no audit entry (tools and tests).
	AddSeckill(ctx context.Context, v domain.Voucher) (domain.Voucher, error)
	// AddSeckillOnce stores v with key and entry in one transaction; a later call with a
	// non-empty key stores nothing and returns the voucher the key names.
	AddSeckillOnce(ctx context.Context, key, fingerprint string, v domain.Voucher, entry domain.AuditEntry) (Creation, error)
	Get(ctx context.Context, id domain.VoucherID) (domain.Voucher, error) // or domain.ErrVoucherNotFound
	// ListByShop returns the shop's vouchers on sale in id order: the newest max of them.
	ListByShop(ctx context.Context, shop domain.ShopID, max int) ([]domain.Voucher, error)
	ListSeckillEndingAfter(ctx context.Context, t time.Time) ([]domain.Voucher, error)
}

// SaleChange applies an admin's control to a stored sale; an unchanged voucher means nothing to do.
type SaleChange func(v domain.Voucher) (domain.Voucher, domain.AuditEntry, error)

// SaleControls stores an admin's change of a live sale.
type SaleControls interface {
	// ChangeSale applies change under the sale's row lock and stores it with its entry in one
	// transaction. A once.Key used before stores nothing (a *domain.ValidationError if for another request).
	ChangeSale(ctx context.Context, id domain.VoucherID, once Once, change SaleChange) (domain.Voucher, bool, error)
}

// Once names an admin's request (its Idempotency-Key) and what it asked, to tell a retry apart.
type Once struct{ Key, Fingerprint string }

// AuditLog reads the append-only trail of admin actions.
type AuditLog interface {
	// List returns up to q.Limit entries newest first, below q.Before, of q.Voucher when set.
	List(ctx context.Context, q AuditQuery) ([]domain.AuditEntry, error)
}

// AuditQuery is one page of the audit trail.
type AuditQuery struct {
	Voucher domain.VoucherID // 0: every voucher
	Before  int64            // 0: from the newest
	Limit   int
}

// SaleOrders reads a sale's orders in pages, one indexed range read per status.
type SaleOrders interface {
	// OrdersAfter returns up to limit orders filter selects, ids above after, in id order.
	OrdersAfter(ctx context.Context, voucher domain.VoucherID, filter domain.OrderFilter, after domain.OrderID, limit int) ([]domain.OrderStatus, error)
}

// GateControls carries an admin's change of a sale to the gate.
type GateControls interface {
	// Apply sets the gate's end and pause to v's and adds the units of v.Sale().Added() it lacks.
	// Idempotent; a gate without v's state writes nothing.
	Apply(ctx context.Context, v domain.Voucher) error
}

// Sessions resolves a login token to its user, or ErrUnknownToken.
type Sessions interface {
	UserID(ctx context.Context, token string) (domain.UserID, error)
}

// BearerSessions resolves a shop identity provider's JWT to its user and admin role, or ErrUnknownToken.
type BearerSessions interface {
	Session(ctx context.Context, token string) (user domain.UserID, admin bool, err error)
}

// TokenIssuer mints login tokens; development and load tests only.
type TokenIssuer interface {
	Mint(ctx context.Context, user domain.UserID) (string, error)
}

// SaleTally is the database's side of a sale, read in one query.
type SaleTally struct {
	Stock                                      int // tb_seckill_voucher.stock
	Failed, Unpaid, Paid, Cancelled, Refunding int64
	// Payments owed back (domain.PaymentKind.Owed), their sum in fen, and the double charges among them.
	RefundsOwed, RefundsOwedFen, DoubleCharges int64
}

// Created counts the orders committed that hold their unit.
func (t SaleTally) Created() int64 { return t.Unpaid + t.Paid }

// OrderLedger counts a voucher's recorded orders for the live sale page.
type OrderLedger interface {
	Tally(ctx context.Context, id domain.VoucherID) (SaleTally, error)
}

// Backlog is what a queue still holds of one voucher's orders.
type Backlog struct {
	Known   bool          // false: the queue keeps no per-voucher figures (the channel)
	Length  int64         // entries not finished yet
	Pending int64         // delivered and not acknowledged
	Lag     time.Duration // age of the oldest unfinished entry; zero when none
}

// QueueOverview is the whole queue at a glance; -1 means "not kept here".
type QueueOverview struct {
	Kind        string // "channel" or "stream"
	Length      int64  // entries waiting in the whole queue (channel), else -1
	DeadLetters int64  // records set aside for an operator (stream), else -1
}

type QueueMonitor interface {
	Overview(ctx context.Context) (QueueOverview, error)
	Backlog(ctx context.Context, id domain.VoucherID) (Backlog, error)
}

// ClaimCounts reports this instance's claim counts per voucher and outcome (e.g. a refusal's code).
type ClaimCounts interface {
	Claims(id domain.VoucherID) map[string]int64
	// History is the counts read once a second over the last minute; empty without claims.
	History(id domain.VoucherID) ClaimHistory
}

// ClaimHistory is past readings of ClaimCounts, oldest first: Claims[outcome][i] is the count at At[i].
type ClaimHistory struct {
	At     []time.Time
	Claims map[string][]int64
}

// OrderLifecycle moves committed orders through payment and cancellation, each a transition of one
// locked row; a cancelled unit goes to the database's stock at once, to the gate after (Returned).
type OrderLifecycle interface {
	// ExpireDue cancels up to limit created orders due by now, skipping rows locked by another instance.
	ExpireDue(ctx context.Context, now time.Time, limit int) ([]ExpiredOrder, error)
	// Unreturned lists up to limit cancelled orders whose unit the gate lacks, oldest first.
	Unreturned(ctx context.Context, limit int) ([]domain.VoucherOrder, error)
	Returned(ctx context.Context, ids []domain.OrderID) error
	// Cancel applies AfterCancel (by buyer): the status after, whether it changed, or ErrOrderNotFound.
	Cancel(ctx context.Context, id domain.OrderID) (domain.OrderStatus, bool, error)
	// Pay records p once per transaction id with its order's change (OrderState.Pay); an id of
	// another order is domain.ErrTransactionReused, an unknown order domain.ErrOrderNotFound.
	Pay(ctx context.Context, p domain.Payment) (PayResult, error)
}

// ExpiredOrder is an order ExpireDue cancelled, and the deadline it missed.
type ExpiredOrder struct {
	Order    domain.VoucherOrder
	Deadline time.Time
}

// PayResult is what OrderLifecycle.Pay did with one notification.
type PayResult struct {
	Status domain.OrderStatus // the order after
	Kind   domain.PaymentKind // what the transaction did when it was first received
	New    bool               // false: the transaction was recorded before; nothing changed now
}

// RoomConfig is what a waiting room's store keeps of its sale.
type RoomConfig struct {
	Rules      domain.RoomRules
	Begin, End time.Time
	Cap        int64 // outstanding passes: the stock at opening plus the margin
}

// NewRoomConfig is sale s's room as a store keeps it, its times to the millisecond.
func NewRoomConfig(s domain.Sale) RoomConfig {
	return RoomConfig{Rules: s.Room(), Begin: s.Begin().Truncate(time.Millisecond), End: s.End().Truncate(time.Millisecond),
		Cap: int64(s.Stock()) + int64(s.Room().Margin())}
}

// RoomStep is one advance of a room's boundary: positions up to Boundary were admitted At.
type RoomStep struct {
	Boundary int64
	At       time.Time
}

// RoomState is a waiting room's shared state, as one Advance returns it.
type RoomState struct {
	Joined int64 // join indexes given: 0..Joined-1
	// Drawn: the draw has closed; N of the joiners are in it, under Seed.
	Drawn bool
	N     int64
	Seed  [domain.RoomSeedSize]byte
	// Below Boundary admitted, below Expired past a pass's lifetime; passes Used, or Lapsed unused.
	Boundary, Expired, Used, Lapsed int64
	// Outstanding passes (live, unused) never exceed Left, the gate's stock (-1: a split voucher).
	Outstanding, Left int64
	// Steps are the advances above the caller's boundary, oldest first, down to Expired.
	Steps []RoomStep
}

type RoomLookup int8

const (
	RoomUnknown RoomLookup = iota
	RoomAbsent
	RoomPresent
)

// RoomStore keeps every sale's waiting room; each operation is atomic, its cost not growing with joiners.
type RoomStore interface {
	// Open writes v's room (NewRoomConfig) unless stored, before the gate makes v claimable.
	Open(ctx context.Context, v domain.Voucher) error
	// Config reads a voucher's room; without one, RoomAbsent if the sale's gate exists, else RoomUnknown.
	Config(ctx context.Context, id domain.VoucherID) (RoomConfig, RoomLookup, error)
	// Join gives user the next join index, or the one given before; the first Join or Advance past
	// domain.InDraw closes the draw, and drawn tells whether it was closed. domain.ErrNoRoom without a room.
	Join(ctx context.Context, id domain.VoucherID, user domain.UserID, now time.Time, seed [domain.RoomSeedSize]byte) (j int64, drawn bool, err error)
	// Advance closes the draw when due, voids stale passes, moves the boundary as the rate allows
	// (within the joiners and the cap) and returns the state. domain.ErrNoRoom without a room.
	Advance(ctx context.Context, id domain.VoucherID, now time.Time, seed [domain.RoomSeedSize]byte, after int64) (RoomState, error)
	// Use records that user's pass, for position, was used; again, nothing.
	Use(ctx context.Context, id domain.VoucherID, user domain.UserID, position int64) error
	// Used tells whether user has used a pass of id's room: a pass admits one order.
	Used(ctx context.Context, id domain.VoucherID, user domain.UserID) (bool, error)
}
