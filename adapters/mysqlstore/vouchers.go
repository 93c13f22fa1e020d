package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// The models mirror the original's columns and stay private; columns never set keep their defaults.

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

// voucherRow is a voucher joined with its sale; LEFT JOINed, a normal voucher's has VoucherID 0.
type voucherRow struct {
	voucherModel
	seckillModel
}

const voucherRowSelect = `SELECT v.id, v.shop_id, v.title, v.sub_title, v.rules, v.pay_value,
	v.actual_value, v.type, v.status, sv.voucher_id, sv.stock, sv.begin_time, sv.end_time, sv.buckets,
	sv.room_opens_before_s, sv.room_admit_rate, sv.room_pass_ttl_s, sv.room_margin, sv.stock_added, sv.paused,
	sv.limit_per_user
FROM tb_voucher AS v `

// readVouchers reads the vouchers where selects, each joined (JOIN, or LEFT JOIN) with its sale.
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

// storedTime is t as precisely as the database keeps it (DATETIME(6)), so AddSeckill returns what Get will.
func storedTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

var (
	_ ports.VoucherRepository = (*VoucherRepo)(nil)
	_ ports.SaleControls      = (*VoucherRepo)(nil)
	_ ports.AuditLog          = (*AuditRepo)(nil)
)

// VoucherRepo stores vouchers in tb_voucher and their sales in tb_seckill_voucher.
type VoucherRepo struct {
	db *bun.DB
}

func NewVoucherRepo(db *bun.DB) *VoucherRepo {
	return &VoucherRepo{db: db}
}

// AddSeckill writes both rows in one transaction and returns the voucher exactly as Get will.
func (r *VoucherRepo) AddSeckill(ctx context.Context, v domain.Voucher) (domain.Voucher, error) {
	if !v.IsSeckill() {
		return domain.Voucher{}, domain.ErrNotSeckill
	}
	return r.addSeckill(ctx, v, "", "", domain.AuditEntry{})
}

// AddSeckillOnce writes the key's row and the audit entry in the voucher's transaction: a concurrent
// call with the same key waits on it until the first commits, then rolls back and reads the winner's.
func (r *VoucherRepo) AddSeckillOnce(ctx context.Context, key, fingerprint string, v domain.Voucher, entry domain.AuditEntry) (ports.Creation, error) {
	if !v.IsSeckill() {
		return ports.Creation{}, domain.ErrNotSeckill
	}
	if entry.IsZero() {
		return ports.Creation{}, domain.ErrNoAuditEntry
	}
	if key != "" {
		if c, ok, err := r.creation(ctx, key); err != nil || ok {
			return c, err
		}
	}
	saved, err := r.addSeckill(ctx, v, key, fingerprint, entry)
	if key != "" && isDuplicateKey(err) {
		c, ok, err := r.creation(ctx, key)
		if err == nil && !ok {
			err = fmt.Errorf("voucher creation key %q: duplicate, then not found", key)
		}
		return c, err
	}
	if err != nil {
		return ports.Creation{}, err
	}
	return ports.Creation{Voucher: saved, Fingerprint: fingerprint, Created: true}, nil
}

// addSeckill writes the voucher's rows, and the key's row and the audit entry if any, in one transaction.
func (r *VoucherRepo) addSeckill(ctx context.Context, v domain.Voucher, key, fingerprint string, entry domain.AuditEntry) (domain.Voucher, error) {
	sale := storedSale(v.Sale())
	vm := voucherModel{
		ShopID: int64(v.ShopID()), Title: v.Title(), SubTitle: v.SubTitle(), Rules: v.Rules(),
		PayValue: v.PayValue(), ActualValue: v.ActualValue(), Type: int8(domain.VoucherSeckill), Status: v.Status(),
	}
	room := sale.Room()
	sm := seckillModel{Stock: sale.Stock(), BeginTime: sale.Begin(), EndTime: sale.End(), Buckets: sale.Buckets(),
		RoomOpensBefore: int(room.OpensBefore() / time.Second), RoomAdmitRate: room.AdmitPerSecond(),
		RoomPassTTL: int(room.PassTTL() / time.Second), RoomMargin: room.Margin(), LimitPerUser: sale.LimitPerUser()}
	err := r.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(&vm).Exec(ctx); err != nil {
			return fmt.Errorf("insert tb_voucher: %w", err)
		}
		if vm.ID <= 0 {
			return errors.New("insert tb_voucher: the database returned no id")
		}
		sm.VoucherID = vm.ID
		if _, err := tx.NewInsert().Model(&sm).Exec(ctx); err != nil {
			return fmt.Errorf("insert tb_seckill_voucher: %w", err)
		}
		if key != "" {
			cm := creationModel{Key: key, VoucherID: vm.ID, Fingerprint: fingerprint}
			if _, err := tx.NewInsert().Model(&cm).Exec(ctx); err != nil {
				return err
			}
		}
		if entry.IsZero() {
			return nil
		}
		return recordAudit(ctx, tx, entry.ForVoucher(domain.VoucherID(vm.ID)))
	})
	if err != nil {
		return domain.Voucher{}, wrap("add seckill voucher", err)
	}
	return v.WithID(domain.VoucherID(vm.ID)).WithSale(sale), nil
}

func (r *VoucherRepo) creation(ctx context.Context, key string) (ports.Creation, bool, error) {
	var cm creationModel
	err := r.db.NewSelect().Model(&cm).Where("idem_key = ?", key).Limit(1).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return ports.Creation{}, false, nil
	}
	if err != nil {
		return ports.Creation{}, false, wrap("read voucher creation key", err)
	}
	v, err := r.Get(ctx, domain.VoucherID(cm.VoucherID))
	if err != nil {
		return ports.Creation{}, false, fmt.Errorf("voucher %d of creation key %q: %w", cm.VoucherID, key, err)
	}
	return ports.Creation{Voucher: v, Fingerprint: cm.Fingerprint}, true, nil
}

func (r *VoucherRepo) Get(ctx context.Context, id domain.VoucherID) (domain.Voucher, error) {
	vs, err := readVouchers(ctx, r.db, "LEFT JOIN", "v.id = ?", int64(id))
	if err != nil {
		return domain.Voucher{}, wrap(fmt.Sprintf("get voucher %d", id), err)
	}
	if len(vs) == 0 {
		return domain.Voucher{}, domain.ErrVoucherNotFound
	}
	return vs[0], nil
}

// ListByShop lists the newest max vouchers on sale (status 1), in id order.
func (r *VoucherRepo) ListByShop(ctx context.Context, shop domain.ShopID, max int) ([]domain.Voucher, error) {
	vs, err := readVouchers(ctx, r.db, "LEFT JOIN", "v.shop_id = ? AND v.status = 1 ORDER BY v.id DESC LIMIT ?", int64(shop), max)
	if err != nil {
		return nil, wrap(fmt.Sprintf("list vouchers of shop %d", shop), err)
	}
	slices.Reverse(vs)
	return vs, nil
}

func (r *VoucherRepo) ListSeckillEndingAfter(ctx context.Context, t time.Time) ([]domain.Voucher, error) {
	vs, err := readVouchers(ctx, r.db, "JOIN", "sv.end_time > ? ORDER BY v.id", t.UTC())
	return vs, wrap("list live seckill vouchers", err)
}

// storedSale is the sale as the database keeps it (times to the microsecond).
func storedSale(s domain.Sale) domain.Sale {
	return s.WithStoredWindow(storedTime(s.Begin()), storedTime(s.End()))
}

// ChangeSale locks the sale's row (order batches and a concurrent retry wait), then looks the key up.
// The row is written as a difference from what was read, with the key's row and the audit entry.
func (r *VoucherRepo) ChangeSale(ctx context.Context, id domain.VoucherID, once ports.Once, change ports.SaleChange) (domain.Voucher, bool, error) {
	var after domain.Voucher
	changed, err := runInTx(ctx, r.db, nil, func(ctx context.Context, tx bun.Tx) (bool, error) {
		where := "v.id = ?"
		if r.db.Dialect().Name() != dialect.SQLite {
			where += " FOR UPDATE"
		}
		vs, err := readVouchers(ctx, tx, "JOIN", where, int64(id))
		if err != nil {
			return false, fmt.Errorf("lock sale: %w", err)
		}
		if len(vs) == 0 {
			return false, domain.ErrVoucherNotFound
		}
		before := vs[0]
		after = before
		if once.Key != "" {
			var keys []controlKeyModel
			if err := tx.NewSelect().Model(&keys).Where("idem_key = ?", once.Key).Limit(1).Scan(ctx); err != nil {
				return false, fmt.Errorf("read control key: %w", err)
			}
			if len(keys) > 0 {
				if keys[0].VoucherID != int64(id) || keys[0].Fingerprint != once.Fingerprint {
					return false, domain.ControlKeyReused()
				}
				return false, nil
			}
		}
		next, entry, err := change(before)
		if err != nil {
			return false, err
		}
		b, a := before.Sale(), storedSale(next.Sale())
		if a.SameControls(b) {
			return false, nil
		}
		err = guarded(ctx, tx.NewUpdate().Model((*seckillModel)(nil)).
			Set("stock = stock + ?", a.Stock()-b.Stock()).
			Set("stock_added = stock_added + ?", a.Added()-b.Added()).
			Set("end_time = ?", a.End()).Set("paused = ?", a.Paused()).
			Where("voucher_id = ?", int64(id)), 1, "update tb_seckill_voucher")
		if err != nil {
			return false, err
		}
		if once.Key != "" {
			km := controlKeyModel{Key: once.Key, VoucherID: int64(id), Fingerprint: once.Fingerprint}
			if _, err := tx.NewInsert().Model(&km).Exec(ctx); err != nil {
				return false, fmt.Errorf("insert tb_sale_control_key: %w", err)
			}
		}
		if err := recordAudit(ctx, tx, entry); err != nil {
			return false, err
		}
		after = next.WithSale(a)
		return true, nil
	})
	if err != nil {
		if errors.Is(err, domain.ErrVoucherNotFound) || errors.As(err, new(*domain.ControlError)) || errors.As(err, new(*domain.ValidationError)) {
			return domain.Voucher{}, false, err
		}
		return domain.Voucher{}, false, wrap(fmt.Sprintf("change sale of voucher %d", id), err)
	}
	return after, changed, nil
}

type controlKeyModel struct {
	bun.BaseModel `bun:"table:tb_sale_control_key"`
	Key           string `bun:"idem_key,pk"`
	VoucherID     int64  `bun:"voucher_id"`
	Fingerprint   string `bun:"fingerprint"`
}

// AuditRepo reads the trail of admin actions in tb_admin_audit, which VoucherRepo's writes append to.
type AuditRepo struct {
	db *bun.DB
}

func NewAuditRepo(db *bun.DB) *AuditRepo {
	return &AuditRepo{db: db}
}

type auditModel struct {
	bun.BaseModel `bun:"table:tb_admin_audit"`
	ID            int64     `bun:"id,pk,autoincrement"`
	AdminID       int64     `bun:"admin_id"`
	Action        string    `bun:"action"`
	VoucherID     int64     `bun:"voucher_id"`
	Detail        string    `bun:"detail"`
	At            time.Time `bun:"create_time"`
}

// recordAudit appends e in the transaction of the action's write, so it commits with its change.
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

// List reads one page by the primary key (every voucher) or by idx_audit_voucher, newest first.
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
