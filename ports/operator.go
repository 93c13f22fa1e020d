package ports

import (
	"context"

	"github.com/hmdp-go/seckill/domain"
)

// The operator's ports: the audit trail of admin actions, and a sale's
// orders read in pages. Neither is on the claim path.

// AuditLog reads the append-only trail of admin actions. Every action is a
// database write that records its entry in the write's own transaction
// (VoucherRepository.AddSeckillOnce, SaleControls.ChangeSale), so an action
// and its entry commit or fail together. Nothing updates or deletes an entry.
type AuditLog interface {
	// List returns up to q.Limit entries, newest first (by id): those with
	// ids below q.Before (0: from the newest), of q.Voucher only when it is
	// set.
	List(ctx context.Context, q AuditQuery) ([]domain.AuditEntry, error)
}

// AuditQuery is one page of the audit trail.
type AuditQuery struct {
	Voucher domain.VoucherID // 0: every voucher
	Before  int64            // 0: from the newest
	Limit   int
}

// SaleOrders reads a sale's recorded orders in pages, by id, for its
// operator: each page costs one indexed range read of at most limit rows
// per status the filter names, whatever the sale's size.
type SaleOrders interface {
	// OrdersAfter returns up to limit of the voucher's orders that filter
	// selects, with ids above after, in id order.
	OrdersAfter(ctx context.Context, voucher domain.VoucherID, filter domain.OrderFilter, after domain.OrderID, limit int) ([]domain.OrderStatus, error)
}
