package domain

import (
	"encoding/json"
	"strings"
	"time"
)

// AuditAction names what an admin did, in the audit trail.
type AuditAction string

const (
	// ActionCreateVoucher: POST /voucher/seckill created a sale.
	ActionCreateVoucher AuditAction = "voucher.create"
	// ActionEndSale: the sale was ended at once.
	ActionEndSale AuditAction = "sale.end"
	// ActionMoveEnd: the sale's end time was moved.
	ActionMoveEnd AuditAction = "sale.end_time"
	// ActionAddStock: units were added to the sale's stock.
	ActionAddStock AuditAction = "sale.stock"
	// ActionPause, ActionResume: claims were refused, then served again.
	ActionPause  AuditAction = "sale.pause"
	ActionResume AuditAction = "sale.resume"
)

// MaxAuditChange bounds an entry's change document: far above any voucher
// (its rules are at most 1024 characters), far below what could bloat the
// table.
const MaxAuditChange = 16 << 10

// AuditEntry is one admin action as the trail keeps it: who, when, what, on
// which voucher, and what changed (a JSON object). Entries are only ever
// appended: nothing changes or removes one.
type AuditEntry struct {
	id      int64
	at      time.Time
	admin   UserID
	action  AuditAction
	voucher VoucherID
	change  string
}

// NewAuditEntry is an action about to be recorded. voucher may be 0 for an
// action that creates its voucher: the store names it (ForVoucher) in the
// transaction that creates it. change must be a JSON object.
func NewAuditEntry(admin UserID, action AuditAction, voucher VoucherID, change string) (AuditEntry, error) {
	if admin <= 0 {
		return AuditEntry{}, invalid("admin", "must be a positive user id")
	}
	if _, err := parseEnum(string(action), "action", "audit action",
		ActionCreateVoucher, ActionEndSale, ActionMoveEnd, ActionAddStock, ActionPause, ActionResume); err != nil {
		return AuditEntry{}, err
	}
	if voucher < 0 {
		return AuditEntry{}, invalid("voucher", "must not be negative")
	}
	if len(change) > MaxAuditChange {
		return AuditEntry{}, invalid("change", "must be at most %d bytes", MaxAuditChange)
	}
	if !json.Valid([]byte(change)) || !strings.HasPrefix(strings.TrimSpace(change), "{") {
		return AuditEntry{}, invalid("change", "must be a JSON object")
	}
	return AuditEntry{admin: admin, action: action, voucher: voucher, change: change}, nil
}

// UnmarshalAuditEntryFromDatabase re-makes a stored entry. It is not a
// constructor: use it only in repositories.
func UnmarshalAuditEntryFromDatabase(id int64, at time.Time, admin UserID, action AuditAction, voucher VoucherID, change string) AuditEntry {
	return AuditEntry{id: id, at: at, admin: admin, action: action, voucher: voucher, change: change}
}

// ForVoucher is the entry about voucher id: how a store names the voucher
// an action created.
func (e AuditEntry) ForVoucher(id VoucherID) AuditEntry { e.voucher = id; return e }

// Recorded is the entry as a store appended it: its id (increasing with
// every entry) and the time it was recorded.
func (e AuditEntry) Recorded(id int64, at time.Time) AuditEntry { e.id, e.at = id, at; return e }

func (e AuditEntry) ID() int64           { return e.id }
func (e AuditEntry) At() time.Time       { return e.at }
func (e AuditEntry) Admin() UserID       { return e.admin }
func (e AuditEntry) Action() AuditAction { return e.action }
func (e AuditEntry) Voucher() VoucherID  { return e.voucher }
func (e AuditEntry) Change() string      { return e.change }
func (e AuditEntry) IsZero() bool        { return e.admin == 0 }

// ErrNoAuditEntry refuses an admin's creation stored without its entry.
var ErrNoAuditEntry = invalid("admin", "an admin's creation needs its audit entry")
