package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/domain"
)

// The models mirror the original's columns and stay private: the rest of the
// service sees domain types only. Columns the service never sets are left to
// their defaults.

type voucherModel struct {
	bun.BaseModel `bun:"table:tb_voucher"`
	ID            int64  `bun:"id,pk,autoincrement"`
	ShopID        int64  `bun:"shop_id"`
	Title         string `bun:"title"`
	SubTitle      string `bun:"sub_title"`
	Rules         string `bun:"rules"`
	PayValue      int64  `bun:"pay_value"`
	ActualValue   int64  `bun:"actual_value"`
	Type          int8   `bun:"type"`
	Status        int8   `bun:"status"`
}

type creationModel struct {
	bun.BaseModel `bun:"table:tb_voucher_creation"`
	Key           string `bun:"idem_key,pk"`
	VoucherID     int64  `bun:"voucher_id"`
	Fingerprint   string `bun:"fingerprint"`
}

type seckillModel struct {
	bun.BaseModel   `bun:"table:tb_seckill_voucher"`
	VoucherID       int64     `bun:"voucher_id,pk"`
	Stock           int       `bun:"stock"`
	BeginTime       time.Time `bun:"begin_time"`
	EndTime         time.Time `bun:"end_time"`
	Buckets         int       `bun:"buckets"`
	RoomOpensBefore int       `bun:"room_opens_before_s"` // the room's columns are all 0 when it has none
	RoomAdmitRate   int       `bun:"room_admit_rate"`
	RoomPassTTL     int       `bun:"room_pass_ttl_s"`
	RoomMargin      int       `bun:"room_margin"`
	StockAdded      int       `bun:"stock_added"`
	Paused          bool      `bun:"paused"`
	LimitPerUser    int       `bun:"limit_per_user"`
}

type orderModel struct {
	bun.BaseModel `bun:"table:tb_voucher_order"`
	ID            int64          `bun:"id,pk"`
	UserID        int64          `bun:"user_id"`
	VoucherID     int64          `bun:"voucher_id"`
	Status        int8           `bun:"status"` // hmdp's codes (lifecycle.go)
	PayDeadline   sql.NullTime   `bun:"pay_deadline"`
	CancelReason  sql.NullString `bun:"cancel_reason"`
	TransactionID sql.NullString `bun:"transaction_id"`
	PayTime       sql.NullTime   `bun:"pay_time"`
	Returned      bool           `bun:"returned"`
	// Slot is which of its buyer's places in the sale (1..the limit per user)
	// the order holds, under the unique key uk_holder_voucher_slot.
	Slot int `bun:"slot"`
}

type failureModel struct {
	bun.BaseModel `bun:"table:tb_voucher_order_failure"`
	OrderID       int64  `bun:"order_id,pk"`
	UserID        int64  `bun:"user_id"`
	VoucherID     int64  `bun:"voucher_id"`
	Reason        string `bun:"reason"`
}

// voucherRow is a voucher joined with its sale; LEFT JOINed, a normal
// voucher's sale columns scan as zero (VoucherID 0: the key is NOT NULL).
type voucherRow struct {
	voucherModel
	seckillModel
}

const voucherRowSelect = `SELECT v.id, v.shop_id, v.title, v.sub_title, v.rules, v.pay_value,
	v.actual_value, v.type, v.status, sv.voucher_id, sv.stock, sv.begin_time, sv.end_time, sv.buckets,
	sv.room_opens_before_s, sv.room_admit_rate, sv.room_pass_ttl_s, sv.room_margin, sv.stock_added, sv.paused,
	sv.limit_per_user
FROM tb_voucher AS v `

// readVouchers reads the vouchers where selects, each joined (JOIN, or LEFT
// JOIN to keep the vouchers without a sale) with its sale.
func readVouchers(ctx context.Context, db bun.IDB, join, where string, args ...any) ([]domain.Voucher, error) {
	var rows []voucherRow
	err := db.NewRaw(voucherRowSelect+join+" tb_seckill_voucher AS sv ON sv.voucher_id = v.id WHERE "+where, args...).Scan(ctx, &rows)
	if err != nil {
		return nil, err
	}
	vs := make([]domain.Voucher, len(rows))
	for i, r := range rows {
		var sale domain.Sale
		if r.VoucherID != 0 {
			sale = domain.UnmarshalSplitSaleFromDatabase(r.Stock, r.BeginTime.UTC(), r.EndTime.UTC(), r.Buckets).
				WithStoredRoom(domain.UnmarshalRoomRulesFromDatabase(
					time.Duration(r.RoomOpensBefore)*time.Second, r.RoomAdmitRate,
					time.Duration(r.RoomPassTTL)*time.Second, r.RoomMargin)).
				WithStoredControls(r.StockAdded, r.Paused).
				WithStoredLimit(r.LimitPerUser)
		}
		spec := domain.VoucherSpec{ShopID: domain.ShopID(r.ShopID), Title: r.Title, SubTitle: r.SubTitle, Rules: r.Rules,
			PayValue: r.PayValue, ActualValue: r.ActualValue}
		vs[i] = domain.UnmarshalVoucherFromDatabase(domain.VoucherID(r.ID), spec, domain.VoucherType(r.Type), r.Status, sale)
	}
	return vs, nil
}

func (m orderModel) toDomain() (domain.VoucherOrder, error) {
	return unmarshalOrder(m.ID, m.UserID, m.VoucherID)
}

// mapRows maps each of rows with f; the first bad row fails them all.
func mapRows[R, T any](rows []R, f func(R) (T, error)) ([]T, error) {
	out := make([]T, len(rows))
	for i, row := range rows {
		var err error
		if out[i], err = f(row); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// unmarshalOrder validates like the constructor: a row written by hand that
// fails it is reported rather than passed on as a zero order.
func unmarshalOrder(id, user, voucher int64) (domain.VoucherOrder, error) {
	o, err := domain.NewVoucherOrder(domain.OrderID(id), domain.UserID(user), domain.VoucherID(voucher))
	if err != nil {
		return domain.VoucherOrder{}, fmt.Errorf("stored order %d is invalid: %w", id, err)
	}
	return o, nil
}

// storedTime is how precisely the database keeps a time (DATETIME(6)), so a
// voucher comes back from AddSeckill exactly as Get will later return it.
func storedTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}
