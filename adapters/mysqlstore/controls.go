package mysqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var _ ports.SaleControls = (*VoucherRepo)(nil)

// ChangeSale locks the sale's row first (FOR UPDATE; SQLite's IMMEDIATE
// transaction holds the only write lock already), so an order batch's
// guarded decrement waits for the control, or the control for it: the
// stock written here is never one a concurrent decrement has moved. The
// row is written as a difference from what was read (stock + added), and
// the audit entry is inserted in the same transaction.
//
// A key is looked up under the sale's lock, so a concurrent retry with the
// same key waits for the first and then finds it; the key's row is
// inserted with the change.
func (r *VoucherRepo) ChangeSale(ctx context.Context, id domain.VoucherID, once ports.Once, change ports.SaleChange) (domain.Voucher, bool, error) {
	var (
		after   domain.Voucher
		changed bool
	)
	err := runInTx(ctx, r.db, func(ctx context.Context, tx bun.Tx) error {
		after, changed = domain.Voucher{}, false
		where := "v.id = ?"
		if r.db.Dialect().Name() != dialect.SQLite {
			where += " FOR UPDATE"
		}
		vs, err := readVouchers(ctx, tx, "JOIN", where, int64(id))
		if err != nil {
			return fmt.Errorf("lock sale: %w", err)
		}
		if len(vs) == 0 {
			return domain.ErrVoucherNotFound
		}
		before := vs[0]
		if once.Key != "" {
			var keys []controlKeyModel
			if err := tx.NewSelect().Model(&keys).Where("idem_key = ?", once.Key).Limit(1).Scan(ctx); err != nil {
				return fmt.Errorf("read control key: %w", err)
			}
			if len(keys) > 0 {
				if keys[0].VoucherID != int64(id) || keys[0].Fingerprint != once.Fingerprint {
					return domain.ControlKeyReused()
				}
				after = before
				return nil
			}
		}
		next, entry, err := change(before)
		if err != nil {
			return err
		}
		b, a := before.Sale(), storedSale(next.Sale())
		if a.SameControls(b) {
			after = before
			return nil
		}
		res, err := tx.NewUpdate().Model((*seckillModel)(nil)).
			Set("stock = stock + ?", a.Stock()-b.Stock()).
			Set("stock_added = stock_added + ?", a.Added()-b.Added()).
			Set("end_time = ?", a.End()).
			Set("paused = ?", a.Paused()).
			Where("voucher_id = ?", int64(id)).Exec(ctx)
		if err != nil {
			return fmt.Errorf("update tb_seckill_voucher: %w", err)
		}
		if n, err := res.RowsAffected(); err == nil && n != 1 {
			return fmt.Errorf("update tb_seckill_voucher: %d rows changed, not 1", n)
		}
		if once.Key != "" {
			km := controlKeyModel{Key: once.Key, VoucherID: int64(id), Fingerprint: once.Fingerprint}
			if _, err := tx.NewInsert().Model(&km).Exec(ctx); err != nil {
				return fmt.Errorf("insert tb_sale_control_key: %w", err)
			}
		}
		if _, err := recordAudit(ctx, tx, entry); err != nil {
			return err
		}
		after = next.WithSale(a)
		changed = true
		return nil
	})
	if err != nil {
		var ce *domain.ControlError
		var ve *domain.ValidationError
		if errors.Is(err, domain.ErrVoucherNotFound) || errors.As(err, &ce) || errors.As(err, &ve) {
			return domain.Voucher{}, false, err
		}
		return domain.Voucher{}, false, wrap(fmt.Sprintf("change sale of voucher %d", id), err)
	}
	return after, changed, nil
}

// controlKeyModel is a sale control's Idempotency-Key.
type controlKeyModel struct {
	bun.BaseModel `bun:"table:tb_sale_control_key"`

	Key         string `bun:"idem_key,pk"`
	VoucherID   int64  `bun:"voucher_id"`
	Fingerprint string `bun:"fingerprint"`
}
