package mysqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// hmdp's tb_voucher_order.status codes.
const (
	statusUnpaid    = 1
	statusPaid      = 2
	statusUsed      = 3
	statusCancelled = 4
	statusRefunding = 5
	statusRefunded  = 6
)

// placeHeld selects the orders holding one of their buyer's places (holding a unit, or cancelled with
// the place forfeited): the rule of uk_holder_voucher_slot.
const placeHeld = "(status NOT IN (4, 5) OR reclaimable = 0)"

var stateOf = map[int8]domain.OrderState{
	statusUnpaid: domain.OrderCreated, statusPaid: domain.OrderPaid, statusUsed: domain.OrderPaid,
	statusCancelled: domain.OrderCancelled, statusRefunding: domain.OrderRefunding, statusRefunded: domain.OrderRefunding,
}

var storedAs = map[domain.OrderState]int8{
	domain.OrderPaid: statusPaid, domain.OrderCancelled: statusCancelled, domain.OrderRefunding: statusRefunding,
}

// statusOf is s's status code, an unpaid order's for any other state.
func statusOf(s domain.OrderState) int8 { return cmp.Or(storedAs[s], statusUnpaid) }

func (m orderModel) status() (domain.OrderStatus, error) {
	o, err := m.toDomain()
	if err != nil {
		return domain.OrderStatus{}, err
	}
	state, ok := stateOf[m.Status]
	if !ok {
		return domain.OrderStatus{}, fmt.Errorf("stored order %d: unknown order status %d", m.ID, m.Status)
	}
	// A NULL time scans as the zero time, which UTC leaves zero.
	st := domain.OrderStatus{Order: o, State: state}
	st.PayDeadline, st.PaidAt = m.PayDeadline.Time.UTC(), m.PayTime.Time.UTC()
	if m.CancelReason.Valid {
		if st.CancelReason, err = domain.ParseCancelReason(m.CancelReason.String); err != nil {
			return domain.OrderStatus{}, fmt.Errorf("stored order %d: %w", m.ID, err)
		}
	}
	return st, nil
}

// guarded runs an UPDATE of want rows the caller holds locked in the state its WHERE guards.
func guarded(ctx context.Context, q *bun.UpdateQuery, want int, op string) error {
	res, err := q.Exec(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(want) {
		return fmt.Errorf("%s: guard matched %d rows (%v)", op, n, err)
	}
	return nil
}

// lockRows locks the rows q reads FOR lock, except on SQLite, whose IMMEDIATE transaction holds the only lock.
func (r *OrderRepo) lockRows(q *bun.SelectQuery, lock string) *bun.SelectQuery {
	if r.db.Dialect().Name() == dialect.SQLite {
		return q
	}
	return q.For(lock)
}

// ExpireDue takes the due orders with SKIP LOCKED, so instances split them. It reads committed on MySQL:
// REPEATABLE READ's next-key locks would block the order worker's inserts, which hold the stock row it needs.
func (r *OrderRepo) ExpireDue(ctx context.Context, now time.Time, limit int) ([]ports.ExpiredOrder, error) {
	var opts *sql.TxOptions
	if r.db.Dialect().Name() == dialect.MySQL {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	due, err := runInTx(ctx, r.db, opts, func(ctx context.Context, tx bun.Tx) ([]ports.ExpiredOrder, error) {
		var rows []orderModel
		q := tx.NewSelect().Model(&rows).Column("id", "user_id", "voucher_id", "pay_deadline").
			Where("status = ?", statusUnpaid).Where("pay_deadline <= ?", now.UTC()).
			Order("pay_deadline").Limit(int64(limit))
		if err := r.lockRows(q, "UPDATE SKIP LOCKED").Scan(ctx); err != nil {
			return nil, fmt.Errorf("select due orders: %w", err)
		}
		if r.afterExpiryScan != nil {
			r.afterExpiryScan()
		}
		orders, err := mapRows(rows, orderModel.toDomain)
		if err != nil {
			return nil, err
		}
		var due []ports.ExpiredOrder
		for i, o := range orders {
			due = append(due, ports.ExpiredOrder{Order: o, Deadline: rows[i].PayDeadline.Time.UTC()})
		}
		return due, r.cancelRows(ctx, tx, orders, statusUnpaid, domain.CancelExpired)
	})
	if err != nil {
		return nil, wrap("expire due orders", err)
	}
	return due, nil
}

// cancelRows cancels orders the caller holds locked in status from, and gives their units back.
func (r *OrderRepo) cancelRows(ctx context.Context, db bun.IDB, orders []domain.VoucherOrder, from int8, reason domain.CancelReason) error {
	if len(orders) == 0 {
		return nil
	}
	ids := make([]int64, len(orders))
	units := map[domain.VoucherID]int{}
	for i, o := range orders {
		ids[i] = int64(o.ID())
		units[o.VoucherID()]++
	}
	err := guarded(ctx, db.NewUpdate().Table("tb_voucher_order").
		Set("status = ?", statusCancelled).Set("cancel_reason = ?", string(reason)).Set("returned = ?", false).
		Set("reclaimable = ?", r.reclaim).Set("update_time = ?", time.Now().UTC()).
		Where("id IN (?)", bun.List(ids)).Where("status = ?", from), len(ids), fmt.Sprintf("cancel %d orders", len(ids)))
	if err != nil {
		return err
	}
	for _, v := range slices.Sorted(maps.Keys(units)) {
		_, err := db.NewUpdate().Table("tb_seckill_voucher").
			Set("stock = stock + ?", units[v]).Set("update_time = ?", time.Now().UTC()).
			Where("voucher_id = ?", int64(v)).Exec(ctx)
		if err != nil {
			return fmt.Errorf("return %d units to voucher %d: %w", units[v], v, err)
		}
	}
	return nil
}

func (r *OrderRepo) Unreturned(ctx context.Context, limit int) ([]domain.VoucherOrder, error) {
	var rows []orderModel
	err := r.db.NewSelect().Model(&rows).Column("id", "user_id", "voucher_id").
		Where("status IN (?, ?)", statusCancelled, statusRefunding).Where("returned = ?", false).
		Order("id").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, wrap("list unreturned orders", err)
	}
	return mapRows(rows, orderModel.toDomain)
}

func (r *OrderRepo) Returned(ctx context.Context, ids []domain.OrderID) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := r.db.NewUpdate().Table("tb_voucher_order").Set("returned = ?", true).
		Where("id IN (?)", bun.List(ids)).Where("status IN (?, ?)", statusCancelled, statusRefunding).Exec(ctx)
	return wrap(fmt.Sprintf("record %d units returned", len(ids)), err)
}

// Cancel locks the order's row, cancels it if it is unpaid (giving its unit back), and answers its
// status after, with the refusal of a paid order. A failed or unknown order is answered as Find does.
func (r *OrderRepo) Cancel(ctx context.Context, id domain.OrderID) (domain.OrderStatus, bool, error) {
	changed, err := runInTx(ctx, r.db, nil, func(ctx context.Context, tx bun.Tx) (bool, error) {
		st, found, err := r.lockOrder(ctx, tx, id)
		if err != nil || !found {
			return false, err
		}
		_, changed, err := st.State.AfterCancel()
		if err != nil || !changed {
			return false, err
		}
		return true, r.cancelRows(ctx, tx, []domain.VoucherOrder{st.Order}, statusOf(st.State), domain.CancelByBuyer)
	})
	if err != nil && !errors.As(err, new(*domain.Refusal)) {
		return domain.OrderStatus{}, false, wrap(fmt.Sprintf("cancel order %d", id), err)
	}
	st, findErr := r.Find(ctx, id)
	if findErr != nil {
		return domain.OrderStatus{}, false, findErr
	}
	return st, changed, err // nil, or the refusal
}

// lockOrder reads the order under its row's lock, if it has a row.
func (r *OrderRepo) lockOrder(ctx context.Context, tx bun.Tx, id domain.OrderID) (st domain.OrderStatus, found bool, err error) {
	var rows []orderModel
	if err := r.lockRows(tx.NewSelect().Model(&rows).Where("id = ?", int64(id)), "UPDATE").Scan(ctx); err != nil {
		return domain.OrderStatus{}, false, fmt.Errorf("lock order: %w", err)
	}
	if len(rows) == 0 {
		return domain.OrderStatus{}, false, nil
	}
	st, err = rows[0].status()
	return st, err == nil, err
}

// filters are the status codes each filter selects (0: any), each read by its own index range, and its reason.
var filters = map[domain.OrderFilter]struct {
	codes  []int8
	reason string
}{
	domain.AllOrders:       {codes: []int8{0}},
	domain.UnpaidOrders:    {codes: []int8{statusUnpaid}},
	domain.PaidOrders:      {codes: []int8{statusPaid, statusUsed}},
	domain.CancelledOrders: {codes: []int8{statusCancelled}},
	domain.ExpiredOrders:   {codes: []int8{statusCancelled}, reason: string(domain.CancelExpired)},
	domain.RefundingOrders: {codes: []int8{statusRefunding, statusRefunded}},
}

// OrdersAfter reads, for each status code of the filter, the next limit orders by id, and merges them.
func (r *OrderRepo) OrdersAfter(ctx context.Context, voucher domain.VoucherID, filter domain.OrderFilter, after domain.OrderID, limit int) ([]domain.OrderStatus, error) {
	if limit <= 0 {
		return []domain.OrderStatus{}, nil
	}
	f, ok := filters[filter]
	if !ok {
		return nil, fmt.Errorf("unknown order filter %q", filter)
	}
	var rows []orderModel
	for _, code := range f.codes {
		var page []orderModel
		q := r.db.NewSelect().Model(&page).
			Column("id", "user_id", "voucher_id", "status", "pay_deadline", "cancel_reason", "pay_time").
			Where("voucher_id = ?", int64(voucher)).Where("id > ?", int64(after))
		if code != 0 {
			q = q.Where("status = ?", code)
		}
		if f.reason != "" {
			q = q.Where("cancel_reason = ?", f.reason)
		}
		if err := q.Order("id").Limit(int64(limit)).Scan(ctx); err != nil {
			return nil, wrap(fmt.Sprintf("list orders of voucher %d after %d", voucher, after), err)
		}
		rows = append(rows, page...)
	}
	slices.SortFunc(rows, func(a, b orderModel) int { return cmp.Compare(a.ID, b.ID) })
	rows = rows[:min(limit, len(rows))]
	return mapRows(rows, orderModel.status)
}

type paymentModel struct {
	bun.BaseModel `bun:"table:tb_payment"`
	TransactionID string    `bun:"transaction_id,pk"`
	OrderID       int64     `bun:"order_id"`
	VoucherID     int64     `bun:"voucher_id"`
	Amount        int64     `bun:"amount"`
	Kind          string    `bun:"kind"`
	ReceivedAt    time.Time `bun:"received_at"`
}

// errPaymentRaced: the same transaction id was inserted concurrently (a failed order has no row to lock).
var errPaymentRaced = fmt.Errorf("payment recorded concurrently: %w", ErrTransient)

// Pay locks the order's row, serialising it with an expiry, a cancel or another notification, and
// records the payment with the order's change (a failed order's payment is only recorded).
func (r *OrderRepo) Pay(ctx context.Context, p domain.Payment) (ports.PayResult, error) {
	id := p.Order.ID()
	res, err := runInTx(ctx, r.db, nil, func(ctx context.Context, tx bun.Tx) (res ports.PayResult, err error) {
		st, err := r.lockForPayment(ctx, tx, id)
		if err != nil {
			return res, err
		}
		var seen []paymentModel
		if err := tx.NewSelect().Model(&seen).Where("transaction_id = ?", p.TransactionID).Scan(ctx); err != nil {
			return res, fmt.Errorf("look the transaction up: %w", err)
		}
		if len(seen) > 0 {
			if seen[0].OrderID != int64(id) {
				return res, domain.ErrTransactionReused
			}
			res.Kind, err = domain.ParsePaymentKind(seen[0].Kind)
			return res, err
		}
		var next domain.OrderState
		if res.Kind, next, err = st.State.Pay(); err != nil {
			return res, err
		}
		if next != st.State {
			err := guarded(ctx, tx.NewUpdate().Table("tb_voucher_order").
				Set("status = ?", statusOf(next)).Set("pay_time = ?", p.At.UTC()).Set("transaction_id = ?", p.TransactionID).
				Set("update_time = ?", time.Now().UTC()).
				Where("id = ?", int64(id)).Where("status = ?", statusOf(st.State)), 1, "record payment")
			if err != nil {
				return res, err
			}
		}
		row := paymentModel{TransactionID: p.TransactionID, OrderID: int64(id), VoucherID: int64(st.Order.VoucherID()),
			Amount: p.Amount, Kind: string(res.Kind), ReceivedAt: p.At.UTC()}
		ins, err := tx.NewInsert().Model(&row).Ignore().Returning("").Exec(ctx)
		if err != nil {
			return res, fmt.Errorf("record the payment: %w", err)
		}
		if n, err := ins.RowsAffected(); err != nil || n != 1 {
			return res, errPaymentRaced
		}
		res.New = true
		return res, nil
	})
	if err == domain.ErrOrderNotFound || err == domain.ErrTransactionReused {
		return ports.PayResult{}, err
	}
	if err != nil {
		return ports.PayResult{}, wrap(fmt.Sprintf("pay order %d", id), err)
	}
	if res.Status, err = r.Find(ctx, id); err != nil {
		return ports.PayResult{}, err
	}
	return res, nil
}

// lockForPayment reads the order under its row's lock, or its failure (domain.ErrOrderNotFound: neither).
func (r *OrderRepo) lockForPayment(ctx context.Context, tx bun.Tx, id domain.OrderID) (domain.OrderStatus, error) {
	if st, found, err := r.lockOrder(ctx, tx, id); found || err != nil {
		return st, err
	}
	var failed []failureModel
	if err := tx.NewSelect().Model(&failed).Where("order_id = ?", int64(id)).Scan(ctx); err != nil {
		return domain.OrderStatus{}, fmt.Errorf("read order failure: %w", err)
	}
	if len(failed) == 0 {
		return domain.OrderStatus{}, domain.ErrOrderNotFound
	}
	o, err := orderModel{ID: failed[0].OrderID, UserID: failed[0].UserID, VoucherID: failed[0].VoucherID}.toDomain()
	return domain.OrderStatus{Order: o, State: domain.OrderFailed}, err
}
