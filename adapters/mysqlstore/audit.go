package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var _ ports.AuditLog = (*AuditRepo)(nil)

// AuditRepo reads the trail of admin actions in tb_admin_audit, which the
// voucher repository's writes append to (recordAudit): the table is
// append-only from the service.
type AuditRepo struct {
	db *bun.DB
}

func NewAuditRepo(db *bun.DB) *AuditRepo {
	if db == nil {
		panic("mysqlstore: NewAuditRepo needs a database")
	}
	return &AuditRepo{db: db}
}

type auditModel struct {
	bun.BaseModel `bun:"table:tb_admin_audit"`

	ID        int64     `bun:"id,pk,autoincrement"`
	AdminID   int64     `bun:"admin_id"`
	Action    string    `bun:"action"`
	VoucherID int64     `bun:"voucher_id"`
	Detail    string    `bun:"detail"`
	At        time.Time `bun:"create_time"`
}

// recordAudit appends e through db, the transaction of the action's
// database write, so that the entry commits with its change or not at all.
func recordAudit(ctx context.Context, db bun.IDB, e domain.AuditEntry) error {
	if e.IsZero() {
		return errors.New("an admin action needs its audit entry")
	}
	if e.Voucher() <= 0 {
		return fmt.Errorf("audit entry %s names no voucher", e.Action())
	}
	m := auditModel{AdminID: int64(e.Admin()), Action: string(e.Action()), VoucherID: int64(e.Voucher()),
		Detail: e.Change(), At: storedTime(time.Now())}
	if _, err := db.NewInsert().Model(&m).Exec(ctx); err != nil {
		return fmt.Errorf("insert tb_admin_audit: %w", err)
	}
	if m.ID <= 0 {
		return errors.New("insert tb_admin_audit: the database returned no id")
	}
	return nil
}

// List reads one page by the primary key (every voucher) or by
// idx_audit_voucher (one voucher), newest first.
func (r *AuditRepo) List(ctx context.Context, q ports.AuditQuery) ([]domain.AuditEntry, error) {
	var rows []auditModel
	sel := r.db.NewSelect().Model(&rows).Order("id DESC").Limit(int64(q.Limit))
	if q.Voucher > 0 {
		sel = sel.Where("voucher_id = ?", int64(q.Voucher))
	}
	if q.Before > 0 {
		sel = sel.Where("id < ?", q.Before)
	}
	if err := sel.Scan(ctx); err != nil {
		return nil, wrap("list audit entries", err)
	}
	out := make([]domain.AuditEntry, len(rows))
	for i, m := range rows {
		out[i] = domain.UnmarshalAuditEntryFromDatabase(m.ID, m.At.UTC(), domain.UserID(m.AdminID),
			domain.AuditAction(m.Action), domain.VoucherID(m.VoucherID), m.Detail)
	}
	return out, nil
}
