package application

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// ControlSale is an admin's control of a live sale: decided by the domain on
// the sale under its row lock, stored with its audit entry, then written to
// the gate. Each is idempotent, so an admin's retry finishes a failed gate write.
type ControlSale struct {
	sales ports.SaleControls
	gate  ports.GateControls
	clock ports.Clock
}

func NewControlSale(sales ports.SaleControls, gate ports.GateControls, clock ports.Clock) *ControlSale {
	mustHave("ControlSale", "sales", sales, "gate", gate, "clock", clock)
	return &ControlSale{sales: sales, gate: gate, clock: clock}
}

// EndNow ends the sale at once; a sale already ended is answered as it is.
func (h *ControlSale) EndNow(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error) {
	return h.control(ctx, admin, id, domain.ActionEndSale, ports.Once{}, domain.Sale.EndNow, endChange)
}

// MoveEnd moves the sale's end, later or earlier (domain.Sale.EndAt).
func (h *ControlSale) MoveEnd(ctx context.Context, admin domain.UserID, id domain.VoucherID, end time.Time) (domain.Voucher, error) {
	return h.control(ctx, admin, id, domain.ActionMoveEnd, ports.Once{}, func(s domain.Sale, now time.Time) (domain.Sale, error) { return s.EndAt(end, now) }, endChange)
}

func endChange(before, after domain.Sale) map[string]any {
	return map[string]any{"endTime": map[string]string{"from": rfc3339(before.End()), "to": rfc3339(after.End())}}
}

// AddStock adds n units to a sale not ended; the gate takes only the added
// total it has not taken yet. Under an idempotency key (empty: none) a retry
// adds nothing; the key reused for another amount or voucher is a validation error.
func (h *ControlSale) AddStock(ctx context.Context, admin domain.UserID, id domain.VoucherID, n int, key string) (domain.Voucher, error) {
	if err := domain.CheckIdempotencyKey(key); err != nil {
		return domain.Voucher{}, err
	}
	once := ports.Once{Key: key, Fingerprint: fmt.Sprintf("%s:%d:%d", domain.ActionAddStock, id, n)}
	return h.control(ctx, admin, id, domain.ActionAddStock, once, func(s domain.Sale, now time.Time) (domain.Sale, error) { return s.AddStock(n, now) },
		func(before, after domain.Sale) map[string]any {
			return map[string]any{"add": n, "stock": map[string]int{"from": before.Stock(), "to": after.Stock()}}
		})
}

// Pause refuses the sale's claims (paused) until Resume, keeping stock and buyers.
func (h *ControlSale) Pause(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error) {
	return h.control(ctx, admin, id, domain.ActionPause, ports.Once{}, func(s domain.Sale, now time.Time) (domain.Sale, error) { return s.WithPause(true, now) }, pausedChange)
}

func (h *ControlSale) Resume(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error) {
	return h.control(ctx, admin, id, domain.ActionResume, ports.Once{}, func(s domain.Sale, now time.Time) (domain.Sale, error) { return s.WithPause(false, now) }, pausedChange)
}

func pausedChange(before, after domain.Sale) map[string]any {
	return map[string]any{"paused": map[string]bool{"from": before.Paused(), "to": after.Paused()}}
}

// control applies change, at the clock's now, to the sale and audits it as describe says.
func (h *ControlSale) control(ctx context.Context, admin domain.UserID, id domain.VoucherID, action domain.AuditAction, once ports.Once,
	change func(s domain.Sale, now time.Time) (domain.Sale, error), describe func(before, after domain.Sale) map[string]any) (domain.Voucher, error) {
	if id <= 0 {
		return domain.Voucher{}, domain.ErrVoucherNotFound
	}
	now := h.clock.Now()
	v, _, err := h.sales.ChangeSale(ctx, id, once, func(v domain.Voucher) (domain.Voucher, domain.AuditEntry, error) {
		s, err := change(v.Sale(), now)
		if err != nil {
			return domain.Voucher{}, domain.AuditEntry{}, err
		}
		entry, err := auditEntry(admin, action, id, describe(v.Sale(), s))
		return v.WithSale(s), entry, err
	})
	if err != nil {
		return domain.Voucher{}, fmt.Errorf("%s voucher %d: %w", action, id, err)
	}
	if err := h.gate.Apply(ctx, v); err != nil {
		return domain.Voucher{}, fmt.Errorf("%s voucher %d: stored; the gate's write failed (retry, or the repair applies it): %w: %w", action, id, ErrBusy, err)
	}
	return v, nil
}

// auditEntry: id 0 is a creation.
func auditEntry(admin domain.UserID, action domain.AuditAction, id domain.VoucherID, change map[string]any) (domain.AuditEntry, error) {
	b, err := json.Marshal(change)
	if err != nil {
		return domain.AuditEntry{}, fmt.Errorf("describe the change: %w", err)
	}
	return domain.NewAuditEntry(admin, action, id, string(b))
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

const (
	DefaultAuditPage = 50
	MaxAuditPage     = 500
)

// ReadAuditLog reads the trail of admin actions, newest first, a page at a time.
type ReadAuditLog struct {
	log ports.AuditLog
}

func NewReadAuditLog(log ports.AuditLog) *ReadAuditLog {
	mustHave("ReadAuditLog", "log", log)
	return &ReadAuditLog{log: log}
}

// AuditPage: Next is the next page's cursor (0: this is the last).
type AuditPage struct {
	Entries []domain.AuditEntry
	Next    int64
}

// Handle answers one page (q.Limit 0: the default); bad input reads nothing.
func (h *ReadAuditLog) Handle(ctx context.Context, q ports.AuditQuery) (AuditPage, error) {
	if q.Limit == 0 {
		q.Limit = DefaultAuditPage
	}
	switch {
	case q.Limit < 1 || q.Limit > MaxAuditPage:
		return AuditPage{}, &domain.ValidationError{Field: "limit", Reason: fmt.Sprintf("must be 1 to %d", MaxAuditPage)}
	case q.Before < 0:
		return AuditPage{}, &domain.ValidationError{Field: "before", Reason: "must be an entry id (or 0)"}
	case q.Voucher < 0:
		return AuditPage{}, &domain.ValidationError{Field: "voucher", Reason: "must be a voucher id (or 0)"}
	}
	want := q.Limit
	q.Limit++ // one more tells whether there is a next page
	got, err := h.log.List(ctx, q)
	if err != nil {
		return AuditPage{}, fmt.Errorf("read the audit trail: %w", err)
	}
	if len(got) > want {
		return AuditPage{Entries: got[:want], Next: got[want-1].ID()}, nil
	}
	return AuditPage{Entries: got}, nil
}

// AddSeckillVoucher stores a new seckill voucher and preheats its gate.
type AddSeckillVoucher struct {
	vouchers ports.VoucherRepository
	orders   ports.OrderRepository
	gate     ports.StockGate
}

func NewAddSeckillVoucher(vouchers ports.VoucherRepository, orders ports.OrderRepository, gate ports.StockGate) *AddSeckillVoucher {
	mustHave("AddSeckillVoucher", "vouchers", vouchers, "orders", orders, "gate", gate)
	return &AddSeckillVoucher{vouchers: vouchers, orders: orders, gate: gate}
}

// HandleOnce saves the voucher with its audit entry, then preheats it. A retry
// with the same key (empty: none) returns the same voucher and makes sure its
// gate exists; the key reused for another voucher is a validation error.
func (h *AddSeckillVoucher) HandleOnce(ctx context.Context, admin domain.UserID, key string, v domain.Voucher) (domain.Voucher, error) {
	if !v.IsSeckill() {
		return domain.Voucher{}, domain.ErrNotSeckill
	}
	fp := ""
	if key != "" {
		if err := domain.CheckIdempotencyKey(key); err != nil {
			return domain.Voucher{}, err
		}
		fp = fingerprint(v)
	}
	entry, err := creationEntry(admin, key, v)
	if err != nil {
		return domain.Voucher{}, err
	}
	c, err := h.vouchers.AddSeckillOnce(ctx, key, fp, v, entry)
	if err != nil {
		return domain.Voucher{}, fmt.Errorf("save voucher: %w", err)
	}
	if c.Created {
		if err := h.gate.Preheat(ctx, c.Voucher); err != nil {
			return c.Voucher, fmt.Errorf("preheat voucher %d: %w", c.Voucher.ID(), err)
		}
		return c.Voucher, nil
	}
	if c.Fingerprint != fp {
		return domain.Voucher{}, &domain.ValidationError{Field: "Idempotency-Key",
			Reason: fmt.Sprintf("was already used to create voucher %d with other values; use a new key for a new voucher", c.Voucher.ID())}
	}
	// A retry, maybe after claims were served: Restore writes only an absent gate.
	return c.Voucher, restoreVoucher(ctx, h.orders, h.gate, c.Voucher)
}

// creationEntry records the fields of the voucher asked for (times in UTC).
func creationEntry(admin domain.UserID, key string, v domain.Voucher) (domain.AuditEntry, error) {
	s := v.Sale()
	fields := map[string]any{
		"shopId": int64(v.ShopID()), "title": v.Title(), "subTitle": v.SubTitle(), "rules": v.Rules(),
		"payValue": v.PayValue(), "actualValue": v.ActualValue(), "stock": s.Stock(),
		"beginTime": rfc3339(s.Begin()), "endTime": rfc3339(s.End()),
		"buckets": s.Buckets(), "limitPerUser": s.LimitPerUser(),
	}
	if r := s.Room(); !r.IsZero() {
		fields["waitingRoom"] = map[string]any{
			"opensBeforeSeconds": int64(r.OpensBefore() / time.Second), "admitPerSecond": r.AdmitPerSecond(),
			"passTtlSeconds": int64(r.PassTTL() / time.Second), "margin": r.Margin(),
		}
	}
	if key != "" {
		fields["idempotencyKey"] = key
	}
	return auditEntry(admin, domain.ActionCreateVoucher, 0, fields)
}

// fingerprint tells a key reused for another voucher from a retry; each field
// is hashed behind its length, so no two lists of fields encode alike.
func fingerprint(v domain.Voucher) string {
	s := v.Sale()
	fields := []string{
		strconv.FormatInt(int64(v.ShopID()), 10), v.Title(), v.SubTitle(), v.Rules(),
		strconv.FormatInt(v.PayValue(), 10), strconv.FormatInt(v.ActualValue(), 10),
		strconv.Itoa(s.Stock()),
		strconv.FormatInt(s.Begin().UnixMicro(), 10), strconv.FormatInt(s.End().UnixMicro(), 10),
		strconv.Itoa(s.Buckets()),
	}
	if r := s.Room(); !r.IsZero() {
		// Only if set (and likewise limits), so older keys keep their fingerprints.
		fields = append(fields, "room", r.OpensBefore().String(), strconv.Itoa(r.AdmitPerSecond()),
			r.PassTTL().String(), strconv.Itoa(r.Margin()))
	}
	if n := s.LimitPerUser(); n > 1 {
		fields = append(fields, "limit", strconv.Itoa(n))
	}
	h := sha256.New()
	for _, f := range fields {
		h.Write(binary.AppendUvarint(nil, uint64(len(f))))
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// MaxShopVouchers caps a shop's list to its newest.
const MaxShopVouchers = 200

// ListShopVouchers is the original's /voucher/list.
type ListShopVouchers struct {
	vouchers ports.VoucherRepository
}

func NewListShopVouchers(vouchers ports.VoucherRepository) *ListShopVouchers {
	mustHave("ListShopVouchers", "vouchers", vouchers)
	return &ListShopVouchers{vouchers: vouchers}
}

func (h *ListShopVouchers) Handle(ctx context.Context, shop domain.ShopID) ([]domain.Voucher, error) {
	vs, err := h.vouchers.ListByShop(ctx, shop, MaxShopVouchers)
	if err != nil {
		return nil, fmt.Errorf("list vouchers of shop %d: %w", shop, err)
	}
	return vs, nil
}

// MaxSaleBoard caps the vouchers one live sale page request reads.
const MaxSaleBoard = 12

// SaleDashboard gathers what the live sale page shows of each sale not ended.
type SaleDashboard struct {
	vouchers ports.VoucherRepository
	rooms    *RoomDirectory
	gate     ports.GateAudit
	ledger   ports.OrderLedger
	queue    ports.QueueMonitor
	claims   ports.ClaimCounts
	clock    ports.Clock
}

func NewSaleDashboard(vouchers ports.VoucherRepository, gate ports.GateAudit, ledger ports.OrderLedger,
	queue ports.QueueMonitor, claims ports.ClaimCounts, rooms *RoomDirectory, clock ports.Clock,
) *SaleDashboard {
	mustHave("SaleDashboard", "vouchers", vouchers, "gate", gate, "ledger", ledger, "queue", queue, "claims", claims, "rooms", rooms, "clock", clock)
	return &SaleDashboard{vouchers: vouchers, gate: gate, ledger: ledger, queue: queue, claims: claims, rooms: rooms, clock: clock}
}

// SaleBoardQuery: History adds each sale's last minute of claim counts.
type SaleBoardQuery struct{ History bool }

// SaleBoard: Sales are the first MaxSaleBoard sales not ended (selling, sold
// out, upcoming, each by start time); Total counts them all.
type SaleBoard struct {
	At    time.Time
	Queue ports.QueueOverview
	Sales []SaleRow
	Total int
}

// SaleState is where a sale shown stands.
type SaleState string

const (
	SaleSelling  SaleState = "live"     // started, and the gate has stock left
	SaleSoldOut  SaleState = "sold_out" // started, and the gate has none
	SaleUpcoming SaleState = "upcoming" // not started yet
)

// SaleRow is one sale's figures.
type SaleRow struct {
	Voucher   domain.Voucher
	State     SaleState
	GateFound bool // false: the gate holds no state, GateStock means nothing
	GateStock int
	DB        ports.SaleTally
	Backlog   ports.Backlog
	Claims    map[string]int64
	History   ports.ClaimHistory // only when the query asked for it
	Room      *RoomFigures       // nil: no waiting room
}

// SaleBalance accounts for a sale's units: the database's Initial = stock left
// + unpaid + paid; the gate sold the same plus the claims in flight. Holds is
// one reading's verdict; Problem says what is wrong when not.
type SaleBalance struct {
	Initial  int
	InFlight int // the database's stock left minus the gate's
	Holds    bool
	Problem  string
}

// Balance checks the row's books (with a channel queue, only a gate ahead of
// the database can be told).
func (r SaleRow) Balance() SaleBalance {
	b := SaleBalance{Initial: r.DB.Stock + int(r.DB.Created()), Holds: true}
	if !r.GateFound {
		b.Holds, b.Problem = false, "Redis holds no state for this sale: claims answer not_found until the repair loop restores it"
		return b
	}
	b.InFlight = r.DB.Stock - r.GateStock
	switch {
	case b.InFlight < 0:
		b.Holds, b.Problem = false, fmt.Sprintf("Redis has %d more units left than MySQL: it forgot orders MySQL has (the repair loop puts them back; `seckill reconcile` shows them)", -b.InFlight)
	case r.Backlog.Known && int64(b.InFlight) > r.Backlog.Length:
		b.Holds, b.Problem = false, fmt.Sprintf("%d claims taken in Redis are neither orders in MySQL nor in the queue (`seckill reconcile` lists them)", int64(b.InFlight)-r.Backlog.Length)
	}
	return b
}

// Handle reads the board; a failing backend fails it rather than show zeros.
// Each sale is read database, gate, then queue, so a claim between the reads
// shows as in flight, never as a gate ahead of the database.
func (h *SaleDashboard) Handle(ctx context.Context, q SaleBoardQuery) (SaleBoard, error) {
	now := h.clock.Now()
	b := SaleBoard{At: now}
	var err error
	if b.Queue, err = h.queue.Overview(ctx); err != nil {
		return b, fmt.Errorf("queue overview: %w", err)
	}
	vs, err := h.vouchers.ListSeckillEndingAfter(ctx, now)
	if err != nil {
		return b, fmt.Errorf("list sales not ended: %w", err)
	}
	b.Total = len(vs)
	// By start time, so the cap keeps the started sales.
	slices.SortFunc(vs, func(x, y domain.Voucher) int {
		return cmp.Or(x.Sale().Begin().Compare(y.Sale().Begin()), cmp.Compare(x.ID(), y.ID()))
	})
	if len(vs) > MaxSaleBoard {
		vs = vs[:MaxSaleBoard]
	}
	b.Sales = make([]SaleRow, 0, len(vs))
	for _, v := range vs {
		row := SaleRow{Voucher: v, State: SaleUpcoming, Claims: h.claims.Claims(v.ID())}
		if q.History {
			row.History = h.claims.History(v.ID())
		}
		if row.DB, err = h.ledger.Tally(ctx, v.ID()); err != nil {
			return b, fmt.Errorf("orders of voucher %d: %w", v.ID(), err)
		}
		if row.GateStock, row.GateFound, err = h.gate.Stock(ctx, v.ID()); err != nil {
			return b, fmt.Errorf("gate stock of voucher %d: %w", v.ID(), err)
		}
		if row.Backlog, err = h.queue.Backlog(ctx, v.ID()); err != nil {
			return b, fmt.Errorf("queue backlog of voucher %d: %w", v.ID(), err)
		}
		if f, ok, err := h.rooms.Read(ctx, v); err != nil {
			return b, fmt.Errorf("waiting room of voucher %d: %w", v.ID(), err)
		} else if ok {
			row.Room = &f
		}
		if v.Sale().Started(now) {
			row.State = SaleSelling
			if row.GateFound && row.GateStock == 0 {
				row.State = SaleSoldOut
			}
		}
		b.Sales = append(b.Sales, row)
	}
	rank := map[SaleState]int{SaleSelling: 0, SaleSoldOut: 1, SaleUpcoming: 2}
	slices.SortStableFunc(b.Sales, func(x, y SaleRow) int { return cmp.Compare(rank[x.State], rank[y.State]) })
	return b, nil
}

// The bounds of a sale's order list: no answer is as large as the sale.
const (
	DefaultOrderPage = 100
	MaxOrderPage     = 1000
	ExportPage       = 1000 // what Export holds in memory
)

// ListSaleOrders reads a sale's orders for its operator, a page at a time.
type ListSaleOrders struct {
	vouchers ports.VoucherRepository
	orders   ports.SaleOrders
}

func NewListSaleOrders(vouchers ports.VoucherRepository, orders ports.SaleOrders) *ListSaleOrders {
	mustHave("ListSaleOrders", "vouchers", vouchers, "orders", orders)
	return &ListSaleOrders{vouchers: vouchers, orders: orders}
}

// SaleOrdersQuery: the orders with ids above After, at most Limit (0: the default).
type SaleOrdersQuery struct {
	Voucher domain.VoucherID
	Filter  domain.OrderFilter
	After   domain.OrderID
	Limit   int
}

// SaleOrdersPage: Next is the next page's cursor (0: this is the last).
type SaleOrdersPage struct {
	Orders []domain.OrderStatus
	Next   domain.OrderID
}

// Handle answers one page; bad input is refused before anything is read.
func (h *ListSaleOrders) Handle(ctx context.Context, q SaleOrdersQuery) (SaleOrdersPage, error) {
	if q.Limit == 0 {
		q.Limit = DefaultOrderPage
	}
	if q.Limit < 1 || q.Limit > MaxOrderPage {
		return SaleOrdersPage{}, &domain.ValidationError{Field: "limit", Reason: fmt.Sprintf("must be 1 to %d", MaxOrderPage)}
	}
	if q.After < 0 {
		return SaleOrdersPage{}, &domain.ValidationError{Field: "after", Reason: "must be an order id (or 0)"}
	}
	if err := h.exists(ctx, q.Voucher); err != nil {
		return SaleOrdersPage{}, err
	}
	got, err := h.orders.OrdersAfter(ctx, q.Voucher, q.Filter, q.After, q.Limit+1)
	if err != nil {
		return SaleOrdersPage{}, fmt.Errorf("list orders of voucher %d: %w", q.Voucher, err)
	}
	if len(got) > q.Limit { // the one more than asked
		return SaleOrdersPage{Orders: got[:q.Limit], Next: got[q.Limit-1].Order.ID()}, nil
	}
	return SaleOrdersPage{Orders: got}, nil
}

// Export hands every order the filter selects to page, ExportPage at a time in
// id order, none twice; page is called at least once, and only once the voucher was found.
func (h *ListSaleOrders) Export(ctx context.Context, voucher domain.VoucherID, filter domain.OrderFilter, page func([]domain.OrderStatus) error) error {
	if err := h.exists(ctx, voucher); err != nil {
		return err
	}
	var after domain.OrderID
	for first := true; ; first = false {
		got, err := h.orders.OrdersAfter(ctx, voucher, filter, after, ExportPage)
		if err != nil {
			return fmt.Errorf("export orders of voucher %d after %d: %w", voucher, after, err)
		}
		if len(got) > 0 || first {
			if err := page(got); err != nil {
				return err
			}
		}
		if len(got) < ExportPage {
			return nil
		}
		after = got[len(got)-1].Order.ID()
	}
}

func (h *ListSaleOrders) exists(ctx context.Context, voucher domain.VoucherID) error {
	if voucher <= 0 {
		return domain.ErrVoucherNotFound
	}
	if _, err := h.vouchers.Get(ctx, voucher); err != nil {
		return fmt.Errorf("voucher %d: %w", voucher, err)
	}
	return nil
}
