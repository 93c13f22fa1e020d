package application

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// ControlSale is an admin's control of a live sale: end it now, move its
// end. Each is decided by the domain on the sale as the database holds it
// (under its row lock), stored there with its audit entry, then written to
// the gate, where every instance's claims see it at once.
//
// The database is written first: it is the record, and a change it refuses
// never reaches the gate. When the gate's write fails after the commit, the
// control answers an error and the admin's retry finishes it: each control
// is idempotent (the same request again stores nothing, records no second
// entry, and writes the gate again from the database's sale).
type ControlSale struct {
	sales ports.SaleControls
	gate  ports.GateControls
	clock ports.Clock
}

func NewControlSale(sales ports.SaleControls, gate ports.GateControls, clock ports.Clock) *ControlSale {
	mustHave("ControlSale", map[string]any{"sales": sales, "gate": gate, "clock": clock})
	return &ControlSale{sales: sales, gate: gate, clock: clock}
}

// EndNow ends the sale at once: claims answer ended from the gate's next
// check. A sale already ended is answered as it is.
func (h *ControlSale) EndNow(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error) {
	now := h.clock.Now()
	return h.setEnd(ctx, admin, id, domain.ActionEndSale, func(s domain.Sale) (domain.Sale, error) { return s.EndNow(now) })
}

// MoveEnd moves the sale's end, later or earlier (domain.Sale.EndAt).
func (h *ControlSale) MoveEnd(ctx context.Context, admin domain.UserID, id domain.VoucherID, end time.Time) (domain.Voucher, error) {
	now := h.clock.Now()
	return h.setEnd(ctx, admin, id, domain.ActionMoveEnd, func(s domain.Sale) (domain.Sale, error) { return s.EndAt(end, now) })
}

// AddStock adds n units to a sale that has not ended, in MySQL (its
// stock and its total of added units, with the audit entry) and then in
// the gate, which takes the units of the total it has not taken yet: a
// retry of the gate's write, or the repair's (RestoreGate.Repair), never
// adds them twice. Under an idempotency key (key, empty: none) a retry of
// the whole request adds nothing either: it answers the sale as it is and
// writes the gate again; the key reused for another amount or voucher is
// a validation error. Without a key each request is a new addition.
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

// Pause refuses the sale's claims (code paused) from the gate's next
// check, on every instance, until Resume; the stock and the buyers are
// kept. Idempotent.
func (h *ControlSale) Pause(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error) {
	return h.setPaused(ctx, admin, id, true, domain.ActionPause)
}

// Resume serves the sale's claims again. Idempotent.
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

// control stores the change in the database with its entry (once under
// once's key, if any), then applies the sale as stored to the gate.
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
		// Busy, not an internal error: the change is stored, the gate's
		// write is idempotent, and a retry (or the repair) finishes it.
		return domain.Voucher{}, fmt.Errorf("%s voucher %d: stored; the gate's write failed (retry, or the repair applies it): %w: %w", action, id, ErrBusy, err)
	}
	return v, nil
}

// auditEntry records action on voucher id (0: a creation) by admin, the change
// described by its fields.
func auditEntry(admin domain.UserID, action domain.AuditAction, id domain.VoucherID, change map[string]any) (domain.AuditEntry, error) {
	b, err := json.Marshal(change)
	if err != nil {
		return domain.AuditEntry{}, fmt.Errorf("describe the change: %w", err)
	}
	return domain.NewAuditEntry(admin, action, id, string(b))
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// The bounds of an audit page.
const (
	DefaultAuditPage = 50
	MaxAuditPage     = 500
)

// ReadAuditLog reads the trail of admin actions, newest first, a page at a
// time. There is no use case that changes or removes an entry.
type ReadAuditLog struct {
	log ports.AuditLog
}

func NewReadAuditLog(log ports.AuditLog) *ReadAuditLog {
	mustHave("ReadAuditLog", map[string]any{"log": log})
	return &ReadAuditLog{log: log}
}

// AuditPage is a page of entries, newest first, and the cursor of the next
// one (0: this is the last).
type AuditPage struct {
	Entries []domain.AuditEntry
	Next    int64
}

// Handle answers one page: q.Limit 0 is the default, and a limit or cursor
// out of range is a validation error, with nothing read.
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
