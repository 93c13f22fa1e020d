package application

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// ControlSale is an admin's control of a live sale: decided by the domain on
// the sale under its row lock, stored with its audit entry, then written to
// the gate. Each is idempotent, so when the gate's write fails after the
// commit the admin's retry finishes it.
type ControlSale struct {
	sales ports.SaleControls
	gate  ports.GateControls
	clock ports.Clock
}

func NewControlSale(sales ports.SaleControls, gate ports.GateControls, clock ports.Clock) *ControlSale {
	mustHave("ControlSale", map[string]any{"sales": sales, "gate": gate, "clock": clock})
	return &ControlSale{sales: sales, gate: gate, clock: clock}
}

// EndNow ends the sale at once; a sale already ended is answered as it is.
func (h *ControlSale) EndNow(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error) {
	now := h.clock.Now()
	return h.setEnd(ctx, admin, id, domain.ActionEndSale, func(s domain.Sale) (domain.Sale, error) { return s.EndNow(now) })
}

// MoveEnd moves the sale's end, later or earlier (domain.Sale.EndAt).
func (h *ControlSale) MoveEnd(ctx context.Context, admin domain.UserID, id domain.VoucherID, end time.Time) (domain.Voucher, error) {
	now := h.clock.Now()
	return h.setEnd(ctx, admin, id, domain.ActionMoveEnd, func(s domain.Sale) (domain.Sale, error) { return s.EndAt(end, now) })
}

// AddStock adds n units to a sale not ended; the gate takes only the added
// total it has not taken yet, so no rewrite adds twice. Under an idempotency
// key (empty: none) a retry adds nothing and rewrites the gate; the key reused
// for another amount or voucher is a validation error.
func (h *ControlSale) AddStock(ctx context.Context, admin domain.UserID, id domain.VoucherID, n int, key string) (domain.Voucher, error) {
	if err := domain.CheckIdempotencyKey(key); err != nil { // empty: no key
		return domain.Voucher{}, err
	}
	now := h.clock.Now()
	once := ports.Once{Key: key, Fingerprint: fmt.Sprintf("%s:%d:%d", domain.ActionAddStock, id, n)}
	return h.control(ctx, admin, id, domain.ActionAddStock, once, func(s domain.Sale) (domain.Sale, map[string]any, error) {
		after, err := s.AddStock(n, now)
		return after, map[string]any{"add": n, "stock": map[string]int{"from": s.Stock(), "to": after.Stock()}}, err
	})
}

// Pause refuses the sale's claims (paused) until Resume, keeping stock and buyers.
func (h *ControlSale) Pause(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error) {
	return h.setPaused(ctx, admin, id, true, domain.ActionPause)
}

func (h *ControlSale) Resume(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error) {
	return h.setPaused(ctx, admin, id, false, domain.ActionResume)
}

func (h *ControlSale) setPaused(ctx context.Context, admin domain.UserID, id domain.VoucherID, paused bool, action domain.AuditAction) (domain.Voucher, error) {
	now := h.clock.Now()
	return h.control(ctx, admin, id, action, ports.Once{}, func(s domain.Sale) (domain.Sale, map[string]any, error) {
		after, err := s.WithPause(paused, now)
		return after, map[string]any{"paused": map[string]bool{"from": s.Paused(), "to": paused}}, err
	})
}

func (h *ControlSale) setEnd(ctx context.Context, admin domain.UserID, id domain.VoucherID, action domain.AuditAction,
	move func(domain.Sale) (domain.Sale, error)) (domain.Voucher, error) {
	return h.control(ctx, admin, id, action, ports.Once{}, func(s domain.Sale) (domain.Sale, map[string]any, error) {
		after, err := move(s)
		return after, map[string]any{"endTime": map[string]string{"from": rfc3339(s.End()), "to": rfc3339(after.End())}}, err
	})
}

func (h *ControlSale) control(ctx context.Context, admin domain.UserID, id domain.VoucherID, action domain.AuditAction,
	once ports.Once, change func(domain.Sale) (domain.Sale, map[string]any, error)) (domain.Voucher, error) {
	if id <= 0 {
		return domain.Voucher{}, domain.ErrVoucherNotFound
	}
	v, _, err := h.sales.ChangeSale(ctx, id, once, func(v domain.Voucher) (domain.Voucher, domain.AuditEntry, error) {
		s, what, err := change(v.Sale())
		if err != nil {
			return domain.Voucher{}, domain.AuditEntry{}, err
		}
		entry, err := auditEntry(admin, action, id, what)
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
	mustHave("ReadAuditLog", map[string]any{"log": log})
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
	page := AuditPage{Entries: got}
	if len(got) > want {
		page.Entries = got[:want]
		page.Next = page.Entries[want-1].ID()
	}
	return page, nil
}

// AddSeckillVoucher stores a new seckill voucher and preheats its gate.
type AddSeckillVoucher struct {
	vouchers ports.VoucherRepository
	orders   ports.OrderRepository
	gate     ports.StockGate
}

func NewAddSeckillVoucher(vouchers ports.VoucherRepository, orders ports.OrderRepository, gate ports.StockGate) *AddSeckillVoucher {
	mustHave("AddSeckillVoucher", map[string]any{"vouchers": vouchers, "orders": orders, "gate": gate})
	return &AddSeckillVoucher{vouchers: vouchers, orders: orders, gate: gate}
}

// HandleOnce saves the voucher with its audit entry, then preheats it; a
// failed preheat is finished by RestoreGate or a retry. A retry with the same
// key (empty: none) returns the same voucher and makes sure its gate exists;
// the key reused for another voucher is a validation error.
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
		return domain.Voucher{}, &domain.ValidationError{
			Field:  "Idempotency-Key",
			Reason: fmt.Sprintf("was already used to create voucher %d with other values; use a new key for a new voucher", c.Voucher.ID()),
		}
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

// fingerprint tells a key reused for another voucher from a retry. Each field
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
		// Only if set, so keys recorded before rooms keep their fingerprints.
		fields = append(fields, "room", r.OpensBefore().String(), strconv.Itoa(r.AdmitPerSecond()),
			r.PassTTL().String(), strconv.Itoa(r.Margin()))
	}
	if n := s.LimitPerUser(); n > 1 {
		// Likewise for limits.
		fields = append(fields, "limit", strconv.Itoa(n))
	}
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, f := range fields {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// MaxShopVouchers caps a shop's list (the original's had no LIMIT) to its newest.
const MaxShopVouchers = 200

// ListShopVouchers is the original's /voucher/list.
type ListShopVouchers struct {
	vouchers ports.VoucherRepository
}

func NewListShopVouchers(vouchers ports.VoucherRepository) *ListShopVouchers {
	mustHave("ListShopVouchers", map[string]any{"vouchers": vouchers})
	return &ListShopVouchers{vouchers: vouchers}
}

func (h *ListShopVouchers) Handle(ctx context.Context, shop domain.ShopID) ([]domain.Voucher, error) {
	vs, err := h.vouchers.ListByShop(ctx, shop, MaxShopVouchers)
	if err != nil {
		return nil, fmt.Errorf("list vouchers of shop %d: %w", shop, err)
	}
	return vs, nil
}
