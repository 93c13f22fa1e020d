package memory

import (
	"context"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var _ ports.AuditLog = (*AuditLog)(nil)

// AuditLog is the in-memory trail of admin actions. It reads the trail its
// Vouchers keep, as mysqlstore.AuditRepo and VoucherRepo share
// tb_admin_audit: an action's entry is appended with its change.
type AuditLog struct {
	v *Vouchers
}

func NewAuditLog(vouchers *Vouchers) *AuditLog {
	if vouchers == nil {
		panic("memory: NewAuditLog needs the Vouchers whose trail it keeps")
	}
	return &AuditLog{v: vouchers}
}

func (l *AuditLog) List(ctx context.Context, q ports.AuditQuery) ([]domain.AuditEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.v.mu.Lock()
	defer l.v.mu.Unlock()
	out := []domain.AuditEntry{}
	for i := len(l.v.audit) - 1; i >= 0 && len(out) < q.Limit; i-- {
		e := l.v.audit[i]
		if (q.Before > 0 && e.ID() >= q.Before) || (q.Voucher > 0 && e.Voucher() != q.Voucher) {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// appendAudit stamps e as the SQL table does (the next id, the time to the
// microsecond); the caller holds s.mu.
func (s *Vouchers) appendAudit(e domain.AuditEntry) domain.AuditEntry {
	e = e.Recorded(int64(len(s.audit))+1, time.Now().UTC().Truncate(time.Microsecond))
	s.audit = append(s.audit, e)
	return e
}
