package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// auditEntryDTO is one admin action: who, when, what, on which voucher,
// and what changed (the JSON object recorded with it).
type auditEntryDTO struct {
	ID        string          `json:"id"`
	At        string          `json:"at"`
	AdminID   string          `json:"adminId"`
	Action    string          `json:"action"`
	VoucherID string          `json:"voucherId"`
	Change    json.RawMessage `json:"change"`
}

type auditPageDTO struct {
	Entries []auditEntryDTO `json:"entries"`
	// Next is the cursor of the next (older) page, its `before`; omitted on
	// the last.
	Next string `json:"next,omitempty"`
}

// auditTrail is read-only: the trail has no route that changes or removes
// an entry (PUT, PATCH and DELETE answer 405).
func (a *api) auditTrail(w http.ResponseWriter, r *http.Request) {
	before, err := queryInt(r, "before")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	voucher, err := queryInt(r, "voucher")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	limit, err := queryLimit(r, application.MaxAuditPage)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page, err := a.Audit.Handle(r.Context(), ports.AuditQuery{Before: before, Voucher: domain.VoucherID(voucher), Limit: limit})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := auditPageDTO{Entries: make([]auditEntryDTO, len(page.Entries))}
	for i, e := range page.Entries {
		change := json.RawMessage(e.Change())
		if !json.Valid(change) {
			// Only a row written by hand can hold this; show it, as text.
			change, _ = json.Marshal(e.Change())
		}
		out.Entries[i] = auditEntryDTO{
			ID: strconv.FormatInt(e.ID(), 10), At: e.At().UTC().Format(time.RFC3339Nano),
			AdminID: strconv.FormatInt(int64(e.Admin()), 10), Action: string(e.Action()),
			VoucherID: strconv.FormatInt(int64(e.Voucher()), 10), Change: change,
		}
	}
	if page.Next != 0 {
		out.Next = strconv.FormatInt(page.Next, 10)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeOK(w, out)
}
