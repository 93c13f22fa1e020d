package domain

import (
	"encoding/json"
	"strings"
	"time"
)

type AuditAction string

const (
	ActionCreateVoucher AuditAction = "voucher.create" // POST /voucher/seckill
	ActionEndSale       AuditAction = "sale.end"       // ended at once
	ActionMoveEnd       AuditAction = "sale.end_time"
	ActionAddStock      AuditAction = "sale.stock"
	ActionPause         AuditAction = "sale.pause"
	ActionResume        AuditAction = "sale.resume"
)

// MaxAuditChange bounds an entry's change: far above any voucher, far below table bloat.
const MaxAuditChange = 16 << 10

// AuditEntry is one admin action in the append-only trail.
type AuditEntry struct {
	id      int64
	at      time.Time
	admin   UserID
	action  AuditAction
	voucher VoucherID
	change  string
}

// NewAuditEntry is an action to record; change is a JSON object, voucher 0 for a creation (ForVoucher).
func NewAuditEntry(admin UserID, action AuditAction, voucher VoucherID, change string) (AuditEntry, error) {
	if admin <= 0 {
		return AuditEntry{}, invalid("admin", "must be a positive user id")
	}
	if _, err := parseEnum(string(action), "action", "audit action",
		ActionCreateVoucher, ActionEndSale, ActionMoveEnd, ActionAddStock, ActionPause, ActionResume); err != nil {
		return AuditEntry{}, err
	}
	switch {
	case voucher < 0:
		return AuditEntry{}, invalid("voucher", "must not be negative")
	case len(change) > MaxAuditChange:
		return AuditEntry{}, invalid("change", "must be at most %d bytes", MaxAuditChange)
	case !json.Valid([]byte(change)) || !strings.HasPrefix(strings.TrimSpace(change), "{"):
		return AuditEntry{}, invalid("change", "must be a JSON object")
	}
	return AuditEntry{admin: admin, action: action, voucher: voucher, change: change}, nil
}

// UnmarshalAuditEntryFromDatabase re-makes a stored entry. Use it only in repositories.
func UnmarshalAuditEntryFromDatabase(id int64, at time.Time, admin UserID, action AuditAction, voucher VoucherID, change string) AuditEntry {
	return AuditEntry{id: id, at: at, admin: admin, action: action, voucher: voucher, change: change}
}

// ForVoucher is the entry about voucher id: how a store names the voucher an action created.
func (e AuditEntry) ForVoucher(id VoucherID) AuditEntry { e.voucher = id; return e }

// Recorded is the entry as a store appended it: its id (increasing) and time.
func (e AuditEntry) Recorded(id int64, at time.Time) AuditEntry { e.id, e.at = id, at; return e }

func (e AuditEntry) ID() int64           { return e.id }
func (e AuditEntry) At() time.Time       { return e.at }
func (e AuditEntry) Admin() UserID       { return e.admin }
func (e AuditEntry) Action() AuditAction { return e.action }
func (e AuditEntry) Voucher() VoucherID  { return e.voucher }
func (e AuditEntry) Change() string      { return e.change }
func (e AuditEntry) IsZero() bool        { return e.admin == 0 }

var ErrNoAuditEntry = invalid("admin", "an admin's creation needs its audit entry")
