package mysqlstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var _ ports.SaleOrders = (*OrderRepo)(nil)

// statusesOf are the status codes a filter selects (0: any status), and
// the cancel reason it also requires (empty: any). Each code is read with
// its own range of idx_voucher_status_id, so a page costs at most limit rows
// per code however rare the state, instead of a scan of the sale.
func statusesOf(f domain.OrderFilter) ([]int8, string, error) {
	switch f {
	case domain.AllOrders:
		return []int8{0}, "", nil
	case domain.UnpaidOrders:
		return []int8{statusUnpaid}, "", nil
	case domain.PaidOrders:
		return []int8{statusPaid, statusUsed}, "", nil
	case domain.CancelledOrders:
		return []int8{statusCancelled}, "", nil
	case domain.ExpiredOrders:
		return []int8{statusCancelled}, string(domain.CancelExpired), nil
	case domain.RefundingOrders:
		return []int8{statusRefunding, statusRefunded}, "", nil
	}
	return nil, "", fmt.Errorf("unknown order filter %q", f)
}

// OrdersAfter reads, for each status code of the filter, the next limit
// orders by id, and merges them: no read walks more than its page. Every
// order (no filter) is one range of the voucher_id index, whose entries
// hold the primary key in order.
func (r *OrderRepo) OrdersAfter(ctx context.Context, voucher domain.VoucherID, filter domain.OrderFilter, after domain.OrderID, limit int) ([]domain.OrderStatus, error) {
	if limit <= 0 {
		return []domain.OrderStatus{}, nil
	}
	codes, reason, err := statusesOf(filter)
	if err != nil {
		return nil, err
	}
	read := func(code int8) ([]orderModel, error) {
		var rows []orderModel
		q := r.db.NewSelect().Model(&rows).
			Column("id", "user_id", "voucher_id", "status", "pay_deadline", "cancel_reason", "pay_time").
			Where("voucher_id = ?", int64(voucher)).Where("id > ?", int64(after))
		if code != 0 {
			q = q.Where("status = ?", code)
		}
		if reason != "" {
			q = q.Where("cancel_reason = ?", reason)
		}
		err := q.Order("id").Limit(int64(limit)).Scan(ctx)
		return rows, err
	}
	var rows []orderModel
	for _, code := range codes {
		more, rerr := read(code)
		rows, err = append(rows, more...), rerr
		if err != nil {
			break
		}
	}
	if err != nil {
		return nil, wrap(fmt.Sprintf("list orders of voucher %d after %d", voucher, after), err)
	}
	if len(codes) > 1 {
		slices.SortFunc(rows, func(a, b orderModel) int { return cmp.Compare(a.ID, b.ID) })
		rows = rows[:min(limit, len(rows))]
	}
	out := make([]domain.OrderStatus, len(rows))
	for i, row := range rows {
		if out[i], err = row.status(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
