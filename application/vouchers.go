package application

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// AddSeckillVoucher stores a new seckill voucher and preheats its gate.
type AddSeckillVoucher struct {
	vouchers ports.VoucherRepository
	orders   ports.OrderRepository
	gate     ports.StockGate
}

func NewAddSeckillVoucher(vouchers ports.VoucherRepository, orders ports.OrderRepository, gate ports.StockGate) *AddSeckillVoucher {
	mustHave("AddSeckillVoucher", map[string]any{"vouchers": vouchers, "orders": orders, "gate": gate})
	return &AddSeckillVoucher{vouchers: vouchers, orders: orders, gate: gate}
}

// HandleOnce saves the voucher with its audit entry, then preheats it; a
// failed preheat is finished by RestoreGate or a retry. A retry with the same
// key (empty: none) returns the same voucher and makes sure its gate exists;
// the key reused for another voucher is a validation error.
func (h *AddSeckillVoucher) HandleOnce(ctx context.Context, admin domain.UserID, key string, v domain.Voucher) (domain.Voucher, error) {
	if !v.IsSeckill() {
		return domain.Voucher{}, domain.ErrNotSeckill
	}
	fp := ""
	if key != "" {
		if err := domain.CheckIdempotencyKey(key); err != nil {
			return domain.Voucher{}, err
		}
		fp = fingerprint(v)
	}
	entry, err := creationEntry(admin, key, v)
	if err != nil {
		return domain.Voucher{}, err
	}
	c, err := h.vouchers.AddSeckillOnce(ctx, key, fp, v, entry)
	if err != nil {
		return domain.Voucher{}, fmt.Errorf("save voucher: %w", err)
	}
	if c.Created {
		if err := h.gate.Preheat(ctx, c.Voucher); err != nil {
			return c.Voucher, fmt.Errorf("preheat voucher %d: %w", c.Voucher.ID(), err)
		}
		return c.Voucher, nil
	}
	if c.Fingerprint != fp {
		return domain.Voucher{}, &domain.ValidationError{
			Field:  "Idempotency-Key",
			Reason: fmt.Sprintf("was already used to create voucher %d with other values; use a new key for a new voucher", c.Voucher.ID()),
		}
	}
	// A retry, maybe after claims were served: Restore writes only an absent gate.
	return c.Voucher, restoreVoucher(ctx, h.orders, h.gate, c.Voucher)
}

// creationEntry records the fields of the voucher asked for (times in UTC).
func creationEntry(admin domain.UserID, key string, v domain.Voucher) (domain.AuditEntry, error) {
	s := v.Sale()
	fields := map[string]any{
		"shopId": int64(v.ShopID()), "title": v.Title(), "subTitle": v.SubTitle(), "rules": v.Rules(),
		"payValue": v.PayValue(), "actualValue": v.ActualValue(), "stock": s.Stock(),
		"beginTime": rfc3339(s.Begin()), "endTime": rfc3339(s.End()),
		"buckets": s.Buckets(), "limitPerUser": s.LimitPerUser(),
	}
	if r := s.Room(); !r.IsZero() {
		fields["waitingRoom"] = map[string]any{
			"opensBeforeSeconds": int64(r.OpensBefore() / time.Second), "admitPerSecond": r.AdmitPerSecond(),
			"passTtlSeconds": int64(r.PassTTL() / time.Second), "margin": r.Margin(),
		}
	}
	if key != "" {
		fields["idempotencyKey"] = key
	}
	return auditEntry(admin, domain.ActionCreateVoucher, 0, fields)
}

// fingerprint tells a key reused for another voucher from a retry. Each field
// is hashed behind its length, so no two lists of fields encode alike.
func fingerprint(v domain.Voucher) string {
	s := v.Sale()
	fields := []string{
		strconv.FormatInt(int64(v.ShopID()), 10), v.Title(), v.SubTitle(), v.Rules(),
		strconv.FormatInt(v.PayValue(), 10), strconv.FormatInt(v.ActualValue(), 10),
		strconv.Itoa(s.Stock()),
		strconv.FormatInt(s.Begin().UnixMicro(), 10), strconv.FormatInt(s.End().UnixMicro(), 10),
		strconv.Itoa(s.Buckets()),
	}
	if r := s.Room(); !r.IsZero() {
		// Only if set, so keys recorded before rooms keep their fingerprints.
		fields = append(fields, "room", r.OpensBefore().String(), strconv.Itoa(r.AdmitPerSecond()),
			r.PassTTL().String(), strconv.Itoa(r.Margin()))
	}
	if n := s.LimitPerUser(); n > 1 {
		// Likewise for limits.
		fields = append(fields, "limit", strconv.Itoa(n))
	}
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, f := range fields {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// MaxShopVouchers caps a shop's list (the original's had no LIMIT) to its newest.
const MaxShopVouchers = 200

// ListShopVouchers is the original's /voucher/list.
type ListShopVouchers struct {
	vouchers ports.VoucherRepository
}

func NewListShopVouchers(vouchers ports.VoucherRepository) *ListShopVouchers {
	mustHave("ListShopVouchers", map[string]any{"vouchers": vouchers})
	return &ListShopVouchers{vouchers: vouchers}
}

func (h *ListShopVouchers) Handle(ctx context.Context, shop domain.ShopID) ([]domain.Voucher, error) {
	vs, err := h.vouchers.ListByShop(ctx, shop, MaxShopVouchers)
	if err != nil {
		return nil, fmt.Errorf("list vouchers of shop %d: %w", shop, err)
	}
	return vs, nil
}
