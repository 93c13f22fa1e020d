package memory

import (
	"context"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var (
	_ ports.VoucherRepository = (*Vouchers)(nil)
	_ ports.SaleControls      = (*Vouchers)(nil)
)

// Vouchers is the in-memory VoucherRepository; Orders decrements its stock.
type Vouchers struct {
	mu          mutex
	vouchers    []domain.Voucher      // voucher id i at i-1
	keys        map[string]voucherKey // creations' Idempotency-Keys
	controlKeys map[string]voucherKey // sale controls'
	audit       []domain.AuditEntry   // appended with each change; AuditLog reads it
}

type voucherKey struct {
	id          domain.VoucherID
	fingerprint string
}

func NewVouchers() *Vouchers {
	return &Vouchers{keys: map[string]voucherKey{}, controlKeys: map[string]voucherKey{}}
}

// AddSeckillOnce stores the voucher, the key and the audit entry under one
// hold of the mutex, refusing in the SQL repository's order.
func (s *Vouchers) AddSeckillOnce(ctx context.Context, key, fingerprint string, v domain.Voucher, entry domain.AuditEntry) (ports.Creation, error) {
	if entry.IsZero() && v.IsSeckill() {
		return ports.Creation{}, domain.ErrNoAuditEntry
	}
	return s.addSeckill(ctx, key, fingerprint, v, entry)
}

// AddSeckill returns the voucher with its times as the database keeps them.
func (s *Vouchers) AddSeckill(ctx context.Context, v domain.Voucher) (domain.Voucher, error) {
	c, err := s.addSeckill(ctx, "", "", v, domain.AuditEntry{})
	return c.Voucher, err
}

// addSeckill answers the voucher of a key already used; otherwise it stores
// the voucher, the key and the audit entry, if any.
func (s *Vouchers) addSeckill(ctx context.Context, key, fingerprint string, v domain.Voucher, entry domain.AuditEntry) (ports.Creation, error) {
	if !v.IsSeckill() {
		return ports.Creation{}, domain.ErrNotSeckill
	}
	if err := s.mu.lock(ctx); err != nil {
		return ports.Creation{}, err
	}
	defer s.mu.Unlock()
	sale := storedSale(v.Sale())
	if k, ok := s.keys[key]; ok && key != "" {
		return ports.Creation{Voucher: s.vouchers[k.id-1], Fingerprint: k.fingerprint}, nil
	}
	saved := v.WithID(domain.VoucherID(len(s.vouchers) + 1)).WithSale(sale)
	s.vouchers = append(s.vouchers, saved)
	if key != "" {
		s.keys[key] = voucherKey{id: saved.ID(), fingerprint: fingerprint}
	}
	if !entry.IsZero() {
		s.appendAudit(entry.ForVoucher(saved.ID()))
	}
	return ports.Creation{Voucher: saved, Fingerprint: fingerprint, Created: true}, nil
}

// AddNormal stores a voucher without a sale, which the service never creates;
// for tests of listings that mix both kinds.
func (s *Vouchers) AddNormal(ctx context.Context, spec domain.VoucherSpec) (domain.Voucher, error) {
	return locked(ctx, &s.mu, func() (domain.Voucher, error) {
		saved := domain.UnmarshalVoucherFromDatabase(domain.VoucherID(len(s.vouchers)+1), spec, domain.VoucherNormal, 1, domain.Sale{})
		s.vouchers = append(s.vouchers, saved)
		return saved, nil
	})
}

func (s *Vouchers) Get(ctx context.Context, id domain.VoucherID) (domain.Voucher, error) {
	return locked(ctx, &s.mu, func() (domain.Voucher, error) {
		if v, ok := s.get(id); ok {
			return v, nil
		}
		return domain.Voucher{}, domain.ErrVoucherNotFound
	})
}

// ListByShop lists the newest max vouchers on sale (status 1).
func (s *Vouchers) ListByShop(ctx context.Context, shop domain.ShopID, max int) ([]domain.Voucher, error) {
	vs, err := s.list(ctx, func(v domain.Voucher) bool { return v.ShopID() == shop && v.Status() == 1 })
	if len(vs) > max {
		vs = vs[len(vs)-max:]
	}
	return vs, err
}

func (s *Vouchers) ListSeckillEndingAfter(ctx context.Context, t time.Time) ([]domain.Voucher, error) {
	return s.list(ctx, func(v domain.Voucher) bool { return v.IsSeckill() && !v.Sale().Ended(t) })
}

func (s *Vouchers) list(ctx context.Context, keep func(domain.Voucher) bool) ([]domain.Voucher, error) {
	return locked(ctx, &s.mu, func() ([]domain.Voucher, error) {
		vs := []domain.Voucher{}
		for _, v := range s.vouchers {
			if keep(v) {
				vs = append(vs, v)
			}
		}
		return vs, nil
	})
}

// get is the voucher stored under id; the caller holds s.mu.
func (s *Vouchers) get(id domain.VoucherID) (domain.Voucher, bool) {
	if id < 1 || int(id) > len(s.vouchers) {
		return domain.Voucher{}, false
	}
	return s.vouchers[id-1], true
}

func (s *Vouchers) ChangeSale(ctx context.Context, id domain.VoucherID, once ports.Once, change ports.SaleChange) (domain.Voucher, bool, error) {
	if err := s.mu.lock(ctx); err != nil {
		return domain.Voucher{}, false, err
	}
	defer s.mu.Unlock()
	v, ok := s.get(id)
	if !ok || !v.IsSeckill() {
		return domain.Voucher{}, false, domain.ErrVoucherNotFound
	}
	if once.Key != "" {
		if k, used := s.controlKeys[once.Key]; used {
			if k.id != id || k.fingerprint != once.Fingerprint {
				return domain.Voucher{}, false, domain.ControlKeyReused()
			}
			return v, false, nil
		}
	}
	after, entry, err := change(v)
	if err != nil {
		return domain.Voucher{}, false, err
	}
	sale := storedSale(after.Sale())
	if sale.SameControls(v.Sale()) {
		return v, false, nil
	}
	after = after.WithSale(sale)
	s.vouchers[id-1] = after
	if once.Key != "" {
		s.controlKeys[once.Key] = voucherKey{id: id, fingerprint: once.Fingerprint}
	}
	s.appendAudit(entry)
	return after, true, nil
}

// saleOf is the remaining stock and the limit per user of a voucher that has
// a sale.
func (s *Vouchers) saleOf(id domain.VoucherID) (stock, limit int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.get(id)
	if !ok || !v.IsSeckill() {
		return 0, 0, false
	}
	return v.Sale().Stock(), v.Sale().LimitPerUser(), true
}

// take removes n units of stock; Orders has checked they are there.
func (s *Vouchers) take(id domain.VoucherID, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := &s.vouchers[id-1]
	*v = v.WithStock(v.Sale().Stock() - n)
}

// storedSale and storedTime are a sale and a time as the database keeps
// them (UTC, to the microsecond).
func storedSale(s domain.Sale) domain.Sale {
	return s.WithStoredWindow(storedTime(s.Begin()), storedTime(s.End()))
}

func storedTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

var _ ports.AuditLog = (*AuditLog)(nil)

// AuditLog reads the trail of admin actions its Vouchers keep.
type AuditLog struct {
	v *Vouchers
}

func NewAuditLog(vouchers *Vouchers) *AuditLog {
	return &AuditLog{v: vouchers}
}

func (l *AuditLog) List(ctx context.Context, q ports.AuditQuery) ([]domain.AuditEntry, error) {
	return locked(ctx, &l.v.mu, func() ([]domain.AuditEntry, error) {
		out := []domain.AuditEntry{}
		for i := len(l.v.audit) - 1; i >= 0 && len(out) < q.Limit; i-- {
			e := l.v.audit[i]
			if (q.Before > 0 && e.ID() >= q.Before) || (q.Voucher > 0 && e.Voucher() != q.Voucher) {
				continue
			}
			out = append(out, e)
		}
		return out, nil
	})
}

// appendAudit stamps e as the SQL table does; the caller holds s.mu.
func (s *Vouchers) appendAudit(e domain.AuditEntry) {
	s.audit = append(s.audit, e.Recorded(int64(len(s.audit))+1, storedTime(time.Now())))
}
