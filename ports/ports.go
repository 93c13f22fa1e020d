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

// Errors adapters return for conditions the application reacts to. Anything
// else an adapter returns is treated as transient infrastructure failure.
var (
	// ErrNotAdmitted: an Admission took nothing and changed nothing (its
	// queue was full or closed, or it ran out of time and undid its
	// reservation); the client may simply try again. It wraps the cause.
	ErrNotAdmitted = errors.New("claim not admitted")
	// ErrQueueFull: a bounded queue refused a message; the caller rolls back.
	ErrQueueFull = errors.New("order queue is full")
	// ErrQueueClosed: the queue is shut down; Receive returns it once drained.
	ErrQueueClosed = errors.New("order queue is closed")
	// ErrUnknownToken: the session token is missing or expired.
	ErrUnknownToken = errors.New("unknown session token")
	// ErrPermanent: the database refused the data for good (a value out of
	// range, a constraint other than the ones the repository handles): the
	// same call will fail the same way however often it is retried.
	// Repositories wrap such errors with it, so the application can isolate
	// the order at fault without knowing the driver.
	ErrPermanent = errors.New("refused for good by the database")
)

// Clock tells the time; tests pass a fixed one.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }

// OrderIDs issues order IDs that are unique across processes and restarts.
type OrderIDs interface {
	Next(ctx context.Context) (domain.OrderID, error)
	// Unused hands back an ID that Next issued and nobody wrote anywhere (the
	// claim was refused before anything was reserved), so that a refused
	// claim does not spend one of the day's IDs. The next Next may return it.
	Unused(id domain.OrderID)
}

// Admission reserves a claim and hands its order to fulfilment, as one
// promise: the seam between the claim path and the queue, which each queue
// driver implements its own way.
type Admission interface {
	// Admit returns:
	//   - nil: the order is reserved and on its way to the database, where it
	//     ends created or failed, exactly once;
	//   - a *domain.Refusal (sold out, duplicate, ...): nothing changed;
	//   - an error wrapping ErrNotAdmitted: nothing changed, try again;
	//   - any other error: the order may have been taken (the Stream
	//     driver's script may have run, and then the order is fulfilled);
	//     the caller tells the client the outcome is unknown, with the
	//     order's ID. A driver that can undo (the channel driver releases by
	//     order ID) returns ErrNotAdmitted instead.
	Admit(ctx context.Context, o domain.VoucherOrder) error
}

// StockGate is the fast, atomic check in front of the database: sale window,
// remaining stock and one order per user, decided in one step. The channel
// driver's Admission reserves through it; every driver preheats, restores,
// releases and looks up queued orders through it.
type StockGate interface {
	// Preheat makes a newly created voucher claimable: its stock and window
	// are written with no buyers, only when the gate holds no state for it. A
	// gate that already holds the voucher (an earlier Preheat, or a Restore
	// from the database, perhaps with reservations) is left as it is, so a
	// retried or late Preheat never sells a unit twice. It is idempotent.
	Preheat(ctx context.Context, v domain.Voucher) error
	// Restore rebuilds a voucher's gate state from the database (stock left and
	// the buyers that hold orders) only if the gate has none, and reports
	// whether it wrote anything. Used at start when the gate's store was lost.
	Restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) (bool, error)
	// Reserve takes one unit of stock for the order's user or returns a
	// *domain.Refusal. Nothing changes unless it returns nil. It does not
	// enqueue: that is the Admission's business.
	Reserve(ctx context.Context, o domain.VoucherOrder) error
	// Release undoes the reservation held by exactly this order: the user's
	// mark is removed, and the unit returned to stock when restoreStock is set.
	// It is idempotent and does nothing when the user's mark belongs to another
	// order or is gone.
	Release(ctx context.Context, o domain.VoucherOrder, restoreStock bool) error
	// Return gives back the units of orders the database has cancelled
	// (expired, or cancelled by their buyer): for each, what Release(o,
	// true) does, and the gate also remembers, until the sale's keys expire,
	// that it returned o, so a GateProbe.Heal that read o among the
	// database's buyers before the cancellation committed never puts o's
	// mark back (nor takes its unit again). It is idempotent per order, does
	// not touch a user marked with another order id, and costs one round
	// trip per voucher of the batch (on a cluster, per voucher's slot).
	Return(ctx context.Context, orders []domain.VoucherOrder) error
	// Queued finds the order the gate holds for this user under this ID, if
	// it was reserved through this gate, so status queries can answer
	// "queued" before the database has it. (Buyers a Restore copied from the
	// database are found in the database.) Its cost does not grow with the
	// number of live sales.
	Queued(ctx context.Context, user domain.UserID, id domain.OrderID) (domain.VoucherOrder, bool, error)
}

// OrderIndex finds an order the gate holds by its ID alone, whoever claimed
// it: a payment provider's notice names no user, and a payment for an order
// still queued (the database slow or down for longer than the pay window)
// must be retried, not refused as unknown. Like Queued, its cost does not
// grow with the number of live sales.
type OrderIndex interface {
	QueuedByID(ctx context.Context, id domain.OrderID) (domain.VoucherOrder, bool, error)
}

// GateProbe tells cheaply what the gate has lost, so a running instance can
// repair it from the database without rebuilding every voucher every time:
// a voucher whose whole state is gone (Missing), or one whose state exists
// but is behind the database, having forgotten buyers whose orders are
// already committed (Counts, then Heal).
type GateProbe interface {
	// Missing returns those of ids whose gate state or live-set entry is
	// gone, in one round trip however many ids there are.
	Missing(ctx context.Context, ids []domain.VoucherID) ([]domain.VoucherID, error)
	// Counts returns, for those of ids the gate holds (others are absent from
	// the map: Missing's business), how many buyers it marks and the stock it has left, in one
	// round trip however many ids there are. A buyer's mark is written before
	// its order can reach the database and stays while the order stands, so
	// a gate marking fewer buyers than the database holds orders, or holding
	// more stock than the database, has lost writes.
	Counts(ctx context.Context, ids []domain.VoucherID) (map[domain.VoucherID]GateCount, error)
	// Heal puts back the mark of every one of orders (committed in the
	// database: v's orders) whose user the gate does not mark, and takes a
	// unit off the gate's stock for each mark it put back, while stock is
	// left; a mark put back with no stock left counts as Oversold (its unit
	// was sold again, and the database refuses that resale). A user marked
	// with another order id is left as marked: it holds a unit either way. It
	// never removes a mark and is idempotent: run twice, the second run
	// changes nothing. It writes nothing when the gate holds no state for v.
	// An order the gate was given back is never put back (StockGate.Return).
	Heal(ctx context.Context, v domain.Voucher, orders []domain.VoucherOrder) (Healed, error)
}

// GateCount is the gate's side of the cheap check that it lost writes.
type GateCount struct {
	Buyers int // users marked as holding an order
	Stock  int // units left to reserve
}

// Healed is what one Heal put back.
type Healed struct {
	Restored int // marks put back (committed orders the gate had forgotten)
	Retaken  int // of those, the ones whose unit was taken off the gate's stock
	Oversold int // of those, the ones whose unit the gate had already sold again
}

// Add sums two heals.
func (h Healed) Add(o Healed) Healed {
	return Healed{Restored: h.Restored + o.Restored, Retaken: h.Retaken + o.Retaken, Oversold: h.Oversold + o.Oversold}
}

// GateAudit reads and repairs a voucher's gate state; it is what an operator's
// reconcile uses, never the claim path.
type GateAudit interface {
	// Stock is the gate's remaining stock, and whether the gate has the voucher.
	Stock(ctx context.Context, id domain.VoucherID) (int, bool, error)
	// Buyers is the orders the gate's places hold: order id -> user (a
	// forfeited place holds none).
	Buyers(ctx context.Context, id domain.VoucherID) (map[domain.OrderID]domain.UserID, error)
	// Overwrite sets the gate to v's remaining stock and exactly these
	// buyers, whatever it held. Only safe while no claims are served.
	Overwrite(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) error
}

// QueueBacklog tells which of a voucher's orders a durable queue still holds
// (pending or not yet delivered): claimed, and not yet written or given up.
type QueueBacklog interface {
	// Pending is how many entries it holds.
	Pending(ctx context.Context, id domain.VoucherID) (int64, error)
	// Orders lists the orders it holds, oldest first, reading at most max
	// entries; complete is false when it holds more than that. Entries that
	// carry no valid order are skipped (they are dead-lettered, not fulfilled).
	Orders(ctx context.Context, id domain.VoucherID, max int) (orders []domain.VoucherOrder, complete bool, err error)
}

// Delivery is one order handed out by a queue. Ref identifies it to Ack and in
// logs (for a stream, its key and entry ID; empty for a channel).
type Delivery struct {
	Order    domain.VoucherOrder
	Ref      string
	Attempts int
}

// OrderQueue carries claimed orders from the claim path to fulfilment.
type OrderQueue interface {
	// Publish enqueues an order without blocking, or returns ErrQueueFull
	// (or ErrQueueClosed after Close).
	Publish(ctx context.Context, o domain.VoucherOrder) error
	// Receive waits for at least one order and returns up to max of them, in
	// the order they were published. After Close it returns what is left, then
	// ErrQueueClosed. It returns ctx.Err() when ctx ends first.
	Receive(ctx context.Context, max int) ([]Delivery, error)
	// Ack confirms deliveries whose outcome is committed in the database.
	Ack(ctx context.Context, ds []Delivery) error
	// DeadLetter sets aside, for good, deliveries the application gave up on
	// (their orders are already recorded as failed): a durable queue keeps
	// them with the reason for an operator and acknowledges them. A queue that
	// never redelivers has nothing to set aside and may do nothing.
	DeadLetter(ctx context.Context, ds []Delivery, reason domain.FailureReason) error
	// Close stops Publish; Receive goes on until the queue is drained.
	Close() error
}

// Outcome is what the database did with one order of a batch.
type Outcome = domain.Outcome

// OrderRepository is the source of truth for orders.
type OrderRepository interface {
	// CreateBatch records a batch of claimed orders in one transaction: each
	// order ends created or failed (with a reason), exactly once however often
	// it is delivered, and the voucher's stock never goes below zero. Outcomes
	// come back in the order of the input. An error means nothing was
	// committed and the whole batch may be retried.
	CreateBatch(ctx context.Context, orders []domain.VoucherOrder) ([]Outcome, error)
	// MarkFailed records orders as failed for reason, except those that
	// already have an outcome, which keeps it (New=false). Outcomes come back
	// in input order; like CreateBatch it is all or nothing, idempotent, and
	// serialised with CreateBatch per voucher, so no order ends both created
	// and failed.
	MarkFailed(ctx context.Context, orders []domain.VoucherOrder, reason domain.FailureReason) ([]Outcome, error)
	// Find returns an order's recorded state, or domain.ErrOrderNotFound.
	Find(ctx context.Context, id domain.OrderID) (domain.OrderStatus, error)
	// Buyers lists, by id, the orders of a voucher that hold their buyer's
	// place: those that hold their unit (created or paid), and, Forfeited,
	// those expired or cancelled whose buyer still counts as the sale's (not
	// under SECKILL_RECLAIM_AFTER_CANCEL). A gate rebuilt from them marks
	// both, so a restore forgets no forfeited place.
	Buyers(ctx context.Context, voucher domain.VoucherID) ([]domain.VoucherOrder, error)
	// BuyersAfter is Buyers in pages: at most limit of them whose ids are
	// above after, by id.
	BuyersAfter(ctx context.Context, voucher domain.VoucherID, after domain.OrderID, limit int) ([]domain.VoucherOrder, error)
	// CountBuyers counts, for each of the vouchers in one query, the
	// buyers holding a place in the sale: those whose order holds a unit,
	// and those whose cancelled order forfeited the place (the gate keeps
	// them marked, so the two counts compare); a voucher without orders
	// counts 0.
	CountBuyers(ctx context.Context, vouchers []domain.VoucherID) (map[domain.VoucherID]int, error)
}

// Creation is what AddSeckillOnce did under an idempotency key.
type Creation struct {
	// Voucher is the stored voucher: the new one, or the one the key names
	// (with its sale's remaining stock, as Get returns it).
	Voucher domain.Voucher
	// Fingerprint is the one recorded with the key when it was first used.
	Fingerprint string
	// Created is false when the key was used before and nothing was stored.
	Created bool
}

// VoucherRepository stores vouchers and their sales.
type VoucherRepository interface {
	// AddSeckill stores the voucher and its sale in one transaction and
	// returns it with its new ID. It records no audit entry: it is the
	// tools' and tests' way in; an admin's creation goes through
	// AddSeckillOnce.
	AddSeckill(ctx context.Context, v domain.Voucher) (domain.Voucher, error)
	// AddSeckillOnce is AddSeckill under an idempotency key, for an admin:
	// the first call with key stores the voucher and records key -> (its
	// ID, fingerprint) and the admin's audit entry (named for the new
	// voucher: AuditEntry.ForVoucher) in the same transaction; any later
	// call with key, concurrent or not, stores nothing, records no entry and
	// returns the voucher the key names (Created=false). An empty key
	// records no key: every such call creates a voucher and its entry.
	AddSeckillOnce(ctx context.Context, key, fingerprint string, v domain.Voucher, entry domain.AuditEntry) (Creation, error)
	// Get returns a voucher (with its sale's remaining stock), or domain.ErrVoucherNotFound.
	Get(ctx context.Context, id domain.VoucherID) (domain.Voucher, error)
	// ListByShop returns the shop's vouchers on sale, seckill ones with
	// their sale, in id order: the newest max of them when it has more.
	ListByShop(ctx context.Context, shop domain.ShopID, max int) ([]domain.Voucher, error)
	// ListSeckillEndingAfter returns seckill vouchers whose sale ends after t.
	ListSeckillEndingAfter(ctx context.Context, t time.Time) ([]domain.Voucher, error)
}

// SaleChange is an admin's control applied to a sale as the database holds
// it: the voucher after, and the audit entry that records it; an error
// refuses it. Returning the voucher unchanged means there is nothing to do
// (a retried request).
type SaleChange func(v domain.Voucher) (domain.Voucher, domain.AuditEntry, error)

// SaleControls stores an admin's change of a live sale.
type SaleControls interface {
	// ChangeSale reads voucher id with its sale's row locked, applies change,
	// and stores the sale it returns with its audit entry, in one
	// transaction, so a control never interleaves with another or with an
	// order's stock decrement. It returns the voucher after, and whether
	// anything was stored (false: change returned it unchanged, and no entry
	// was recorded). domain.ErrVoucherNotFound for an unknown voucher or one
	// without a sale; change's error as it returned it, nothing stored.
	//
	// once.Key, when set, is recorded with the change in its transaction: a
	// later call with the key, concurrent or not, stores nothing and
	// answers the voucher as it is (changed false), or a
	// *domain.ValidationError when the key was recorded for another
	// voucher or another request (Fingerprint).
	ChangeSale(ctx context.Context, id domain.VoucherID, once Once, change SaleChange) (domain.Voucher, bool, error)
}

// Once names an admin's request (its Idempotency-Key) and what it asked
// (Fingerprint), so a retry is told apart from a new request.
type Once struct {
	Key, Fingerprint string
}

// The operator's ports: the audit trail of admin actions, and a sale's
// orders read in pages. Neither is on the claim path.

// AuditLog reads the append-only trail of admin actions. Every action is a
// database write that records its entry in the write's own transaction
// (VoucherRepository.AddSeckillOnce, SaleControls.ChangeSale), so an action
// and its entry commit or fail together. Nothing updates or deletes an entry.
type AuditLog interface {
	// List returns up to q.Limit entries, newest first (by id): those with
	// ids below q.Before (0: from the newest), of q.Voucher only when it is
	// set.
	List(ctx context.Context, q AuditQuery) ([]domain.AuditEntry, error)
}

// AuditQuery is one page of the audit trail.
type AuditQuery struct {
	Voucher domain.VoucherID // 0: every voucher
	Before  int64            // 0: from the newest
	Limit   int
}

// SaleOrders reads a sale's recorded orders in pages, by id, for its
// operator: each page costs one indexed range read of at most limit rows
// per status the filter names, whatever the sale's size.
type SaleOrders interface {
	// OrdersAfter returns up to limit of the voucher's orders that filter
	// selects, with ids above after, in id order.
	OrdersAfter(ctx context.Context, voucher domain.VoucherID, filter domain.OrderFilter, after domain.OrderID, limit int) ([]domain.OrderStatus, error)
}

// GateControls carries an admin's change of a sale to the gate, where the
// claim path sees it at once on every instance.
type GateControls interface {
	// Apply makes the gate's end, pause and stock additions v's: the end
	// and the pause in every hash the gate keeps for the voucher (each
	// bucket's, for a split one), and the stock raised by the units of
	// v.Sale().Added() the gate has not taken yet (so each unit is added
	// once, however often Apply runs); the voucher's keys are kept for the
	// retention past the end. A gate that holds no state for v writes
	// nothing: a restore writes it all from the database. Idempotent.
	Apply(ctx context.Context, v domain.Voucher) error
}

// Sessions resolves a login token to its user.
type Sessions interface {
	// UserID returns the token's user or ErrUnknownToken.
	UserID(ctx context.Context, token string) (domain.UserID, error)
}

// BearerSessions resolves the signed token of a shop's own identity provider
// (`Authorization: Bearer <JWT>`) to its user, and tells whether the
// provider made that user an admin.
type BearerSessions interface {
	// Session returns the token's user and admin role, or an error wrapping
	// ErrUnknownToken for a token that fails any check.
	Session(ctx context.Context, token string) (user domain.UserID, admin bool, err error)
}

// TokenIssuer mints login tokens; development and load tests only.
type TokenIssuer interface {
	Mint(ctx context.Context, user domain.UserID) (string, error)
}

// The live sale page's read ports. None is on the claim path; each costs a
// constant number of round trips per voucher, so the page's cost is bounded
// by the number of vouchers it shows.

// SaleTally is the database's side of a sale, read in one query.
type SaleTally struct {
	Stock  int   // tb_seckill_voucher.stock: what is left to sell
	Failed int64 // orders recorded as failed for good
	// The lifecycle: the orders that hold their unit (Created), not yet
	// paid and paid; and the orders that gave their unit back, cancelled
	// (expired or by the buyer) or refunding (paid after they were
	// cancelled).
	Unpaid, Paid, Cancelled, Refunding int64
	// Payments received that must go back to the payer (late, double and
	// unsold ones: domain.PaymentKind.Owed), their sum in fen, and of them
	// the double charges.
	RefundsOwed, RefundsOwedFen, DoubleCharges int64
}

// Created counts the orders committed that hold their unit.
func (t SaleTally) Created() int64 { return t.Unpaid + t.Paid }

// OrderLedger counts a voucher's recorded orders for the live sale page.
type OrderLedger interface {
	// Tally reads the voucher's stock and order counts in one query.
	Tally(ctx context.Context, id domain.VoucherID) (SaleTally, error)
}

// Backlog is what a queue still holds of one voucher's orders.
type Backlog struct {
	// Known is false for a queue that keeps no per-voucher figures (the
	// channel holds every voucher's orders in one line).
	Known bool
	// Length is the entries not finished yet (delivered or not).
	Length int64
	// Pending is the entries delivered to a consumer and not acknowledged.
	Pending int64
	// Lag is the age of the oldest unfinished entry: how far fulfilment
	// trails the claims. Zero when nothing is waiting.
	Lag time.Duration
}

// QueueOverview is the whole queue at a glance; -1 means "not kept here".
type QueueOverview struct {
	Kind        string // "channel" or "stream"
	Length      int64  // entries waiting in the whole queue (channel), else -1
	DeadLetters int64  // records set aside for an operator (stream), else -1
}

// QueueMonitor reads a queue's depth for the live sale page.
type QueueMonitor interface {
	Overview(ctx context.Context) (QueueOverview, error)
	Backlog(ctx context.Context, id domain.VoucherID) (Backlog, error)
}

// ClaimCounts reports how this instance has answered claims so far, per
// voucher and outcome ("success", a refusal's code, "busy", "error"). The
// counts only grow; a reader derives rates from two readings.
type ClaimCounts interface {
	Claims(id domain.VoucherID) map[string]int64
	// History is the voucher's counts as read once a second over the last
	// minute, so a page opened mid-sale can draw it; empty when the voucher
	// counted no claim in that time.
	History(id domain.VoucherID) ClaimHistory
}

// ClaimHistory is a voucher's past readings of ClaimCounts, oldest first:
// Claims[outcome][i] is the count at At[i].
type ClaimHistory struct {
	At     []time.Time
	Claims map[string][]int64
}

// OrderLifecycle moves committed orders through payment and cancellation.
// Every change is a status transition of one row under its lock (the rules
// are domain.OrderState's Pay and AfterCancel), so of a payment and
// an expiry racing for one order exactly one applies first and the other
// sees its result. A cancellation gives the unit back to the database's stock
// in the same transaction; the gate gets it after, and Returned records that
// (application.ExpireOrders: why a crash between the steps loses nothing).
type OrderLifecycle interface {
	// ExpireDue cancels (reason expired) up to limit created orders whose
	// pay deadline is at or before now, with their units, in one
	// transaction, and returns them with the deadlines they missed.
	// Instances running it at once take disjoint orders (rows another holds
	// locked are skipped).
	ExpireDue(ctx context.Context, now time.Time, limit int) ([]ExpiredOrder, error)
	// Unreturned lists up to limit cancelled orders whose unit the gate has
	// not been given back yet, oldest first.
	Unreturned(ctx context.Context, limit int) ([]domain.VoucherOrder, error)
	// Returned records that the gate has these orders' units back.
	Returned(ctx context.Context, ids []domain.OrderID) error
	// Cancel applies domain.OrderState.AfterCancel to the order (reason
	// by buyer), returning the unit with it, and reports its status after
	// and whether it changed; domain.ErrOrderNotFound when the database does
	// not have it.
	Cancel(ctx context.Context, id domain.OrderID) (domain.OrderStatus, bool, error)
	// Pay records p once per transaction id, in one transaction with its
	// order's change, so money received is never lost nor counted twice. A
	// transaction id not seen before is recorded with the kind
	// domain.OrderState.Pay gives the order's state, and the order takes
	// the state it gives with it (created -> paid, cancelled ->
	// refunding; a paid, refunding or failed order is left as it is, its
	// payment owed back). A transaction id recorded before for this order
	// changes nothing and answers its recorded kind (New=false); one recorded
	// for another order is domain.ErrTransactionReused, nothing recorded.
	// domain.ErrOrderNotFound when the database has no such order.
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
