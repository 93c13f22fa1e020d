package application

import (
	"context"
	"fmt"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

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
