package application

import (
	"context"
	"encoding/json"
	"fmt"
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
