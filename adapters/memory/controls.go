package memory

import (
	"context"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var (
	_ ports.GateControls = (*Gate)(nil)
	_ ports.SaleControls = (*Vouchers)(nil)
)

// Apply carries v's end, pause and added units to a sale the gate holds,
// as the Redis gates' controls.lua: each added unit is taken once (the
// sale keeps the total taken), and a voucher the gate does not hold stays
// absent.
func (g *Gate) Apply(ctx context.Context, v domain.Voucher) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.sales[v.ID()]
	if !ok {
		return nil
	}
	old, want := s.sale, v.Sale()
	added := old.Added()
	if d := want.Added() - added; d > 0 {
		s.stock += d
		added = want.Added()
	}
	s.sale = old.WithStoredWindow(old.Begin(), want.End()).WithStoredControls(added, want.Paused())
	return nil
}

// ChangeSale applies change under the mutex, as the SQL repository does
// under the sale's row lock, and appends its audit entry with it.
func (s *Vouchers) ChangeSale(ctx context.Context, id domain.VoucherID, once ports.Once, change ports.SaleChange) (domain.Voucher, bool, error) {
	if err := ctx.Err(); err != nil {
		return domain.Voucher{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vouchers[id]
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
	s.vouchers[id] = after
	if once.Key != "" {
		s.controlKeys[once.Key] = voucherKey{id: id, fingerprint: once.Fingerprint}
	}
	s.appendAudit(entry)
	return after, true, nil
}
