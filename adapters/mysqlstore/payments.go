package mysqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// paymentModel is a tb_payment row: one provider transaction received.
type paymentModel struct {
	bun.BaseModel `bun:"table:tb_payment"`

	TransactionID string    `bun:"transaction_id,pk"`
	OrderID       int64     `bun:"order_id"`
	VoucherID     int64     `bun:"voucher_id"`
	Amount        int64     `bun:"amount"`
	Kind          string    `bun:"kind"`
	ReceivedAt    time.Time `bun:"received_at"`
}

// errPaymentRaced: another transaction inserted the same transaction id
// between this one's check and its insert (possible only for a failed order,
// which has no row to lock); nothing is committed and a retry finds it.
var errPaymentRaced = fmt.Errorf("payment recorded concurrently: %w", ErrTransient)

// Pay locks the order's row (a failed order has none: its payment is only
// recorded), looks the transaction up, and records it with the order's
// change in one transaction. The lock serialises it with an expiry or a
// cancel of the same order (whichever commits first, the other sees its
// result) and with another notification for the order.
func (r *OrderRepo) Pay(ctx context.Context, p domain.Payment) (ports.PayResult, error) {
	id := p.Order.ID()
	var (
		res     ports.PayResult
		refused error
	)
	err := runInTx(ctx, r.db, func(ctx context.Context, tx bun.Tx) error {
		res, refused = ports.PayResult{}, nil
		st, found, err := r.lockForPayment(ctx, tx, id)
		if err != nil || !found {
			refused = domain.ErrOrderNotFound
			return err
		}
		var seen []paymentModel
		if err := tx.NewSelect().Model(&seen).Where("transaction_id = ?", p.TransactionID).Scan(ctx); err != nil {
			return fmt.Errorf("look the transaction up: %w", err)
		}
		if len(seen) > 0 {
			if seen[0].OrderID != int64(id) {
				refused = domain.ErrTransactionReused
				return nil
			}
			res.Kind, err = domain.ParsePaymentKind(seen[0].Kind)
			return err
		}
		var next domain.OrderState
		if res.Kind, next, err = st.State.Pay(); err != nil {
			return err
		}
		if next != st.State {
			if err := r.applyPayment(ctx, tx, id, st.State, next, p); err != nil {
				return err
			}
		}
		row := paymentModel{TransactionID: p.TransactionID, OrderID: int64(id), VoucherID: int64(st.Order.VoucherID()),
			Amount: p.Amount, Kind: string(res.Kind), ReceivedAt: p.At.UTC()}
		ins, err := tx.NewInsert().Model(&row).Ignore().Returning("").Exec(ctx)
		if err != nil {
			return fmt.Errorf("record the payment: %w", err)
		}
		if n, err := ins.RowsAffected(); err != nil || n != 1 {
			return errPaymentRaced
		}
		res.New = true
		return nil
	})
	if err != nil {
		return ports.PayResult{}, wrap(fmt.Sprintf("pay order %d", id), err)
	}
	if refused != nil {
		return ports.PayResult{}, refused
	}
	if res.Status, err = r.Find(ctx, id); err != nil {
		return ports.PayResult{}, err
	}
	return res, nil
}

// lockForPayment reads the order under its row's lock, or its failure.
func (r *OrderRepo) lockForPayment(ctx context.Context, tx bun.Tx, id domain.OrderID) (domain.OrderStatus, bool, error) {
	if st, found, err := r.lockOrder(ctx, tx, id); found || err != nil {
		return st, found, err
	}
	var failed []failureModel
	if err := tx.NewSelect().Model(&failed).Where("order_id = ?", int64(id)).Scan(ctx); err != nil {
		return domain.OrderStatus{}, false, fmt.Errorf("read order failure: %w", err)
	}
	if len(failed) == 0 {
		return domain.OrderStatus{}, false, nil
	}
	o, err := failed[0].toDomain()
	return domain.OrderStatus{Order: o, State: domain.OrderFailed}, err == nil, err
}

// applyPayment moves the locked order from one state to the next, with the
// payment's time and transaction.
func (r *OrderRepo) applyPayment(ctx context.Context, tx bun.Tx, id domain.OrderID, from, to domain.OrderState, p domain.Payment) error {
	res, err := tx.NewUpdate().Table("tb_voucher_order").
		Set("status = ?", statusOf(to)).Set("pay_time = ?", p.At.UTC()).Set("transaction_id = ?", p.TransactionID).
		Set("update_time = ?", time.Now().UTC()).
		Where("id = ?", int64(id)).Where("status = ?", statusOf(from)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("record payment: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("record payment: guard matched %d rows (%v)", n, err)
	}
	return nil
}
