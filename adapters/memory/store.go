package memory

import (
	"cmp"
	"context"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Orders is the in-memory OrderRepository: it plans a batch with domain.PlanBatch, as mysqlstore does,
// its mutex playing the transaction and the stock-row lock. Build one Orders per Vouchers (it writes the stock).
type Orders struct {
	vouchers *Vouchers
	mu       mutex
	orders   map[domain.OrderID]*orderRecord // created and failed
	reclaim  bool
	window   time.Duration
	payments map[string]payment // by transaction id
}

type orderRecord struct {
	domain.OrderStatus
	slot     int // its place among its buyer's (1..the limit) while it holds one or a forfeited one; else 0
	returned bool
}

type payment struct {
	domain.Payment
	kind domain.PaymentKind
}

func NewOrders(vouchers *Vouchers) *Orders {
	return &Orders{vouchers: vouchers, orders: map[domain.OrderID]*orderRecord{}, payments: map[string]payment{}}
}

// WithReclaimAfterCancel sets whether an order cancelled from now on frees its buyer to claim again, and returns s.
func (s *Orders) WithReclaimAfterCancel(on bool) *Orders {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reclaim = on
	return s
}

// WithPayWindow sets the pay window of the orders CreateBatch records from now on (0: never expire) and returns s.
func (s *Orders) WithPayWindow(window time.Duration) *Orders {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.window = window
	return s
}

// CreateBatch reads what domain.PlanBatch needs and applies its plan under one hold of the mutex.
func (s *Orders) CreateBatch(ctx context.Context, orders []domain.VoucherOrder) ([]ports.Outcome, error) {
	return locked(ctx, &s.mu, func() ([]ports.Outcome, error) {
		st := domain.BatchState{
			Recorded: s.recordedOf(orders),
			Stock:    map[domain.VoucherID]int{},
			Limits:   map[domain.VoucherID]int{},
			Holders:  map[domain.VoucherID]map[domain.UserID][]int{},
		}
		for _, o := range orders {
			v := o.VoucherID()
			if _, seen := st.Holders[v]; seen {
				continue
			}
			st.Holders[v] = map[domain.UserID][]int{}
			if left, limit, onSale := s.vouchers.saleOf(v); onSale {
				st.Stock[v], st.Limits[v] = left, limit
			}
		}
		for _, r := range s.orders {
			if held, ok := st.Holders[r.Order.VoucherID()]; ok && r.slot > 0 {
				held[r.Order.UserID()] = append(held[r.Order.UserID()], r.slot)
			}
		}
		return s.write(domain.PlanBatch(orders, st)), nil
	})
}

func (s *Orders) MarkFailed(ctx context.Context, orders []domain.VoucherOrder, reason domain.FailureReason) ([]ports.Outcome, error) {
	return locked(ctx, &s.mu, func() ([]ports.Outcome, error) {
		return s.write(domain.PlanFailures(orders, reason, s.recordedOf(orders))), nil
	})
}

// recordedOf is what is recorded under the orders' IDs. The caller holds s.mu, as for every lower-case method.
func (s *Orders) recordedOf(orders []domain.VoucherOrder) map[domain.OrderID]domain.OrderStatus {
	rec := map[domain.OrderID]domain.OrderStatus{}
	for _, o := range orders {
		if r, ok := s.orders[o.ID()]; ok {
			rec[o.ID()] = r.OrderStatus
		}
	}
	return rec
}

// write applies a plan's writes and answers its outcomes.
func (s *Orders) write(plan domain.BatchPlan) []ports.Outcome {
	for v, n := range plan.Taken {
		s.vouchers.take(v, n)
	}
	for _, o := range plan.Created {
		s.orders[o.ID()] = &orderRecord{
			OrderStatus: domain.OrderStatus{Order: o, State: domain.OrderCreated,
				Lifecycle: domain.Lifecycle{PayDeadline: domain.PayDeadline(o.ID(), s.window)}},
			slot: plan.Slots[o.ID()],
		}
	}
	for _, f := range plan.Failures {
		s.orders[f.Order.ID()] = &orderRecord{OrderStatus: domain.OrderStatus{Order: f.Order, State: domain.OrderFailed, Reason: f.Reason}}
	}
	return plan.Outcomes
}

// sorted is every record by id, the order the SQL repository reads in.
func (s *Orders) sorted() []*orderRecord {
	return slices.SortedFunc(maps.Values(s.orders), func(a, b *orderRecord) int { return cmp.Compare(a.Order.ID(), b.Order.ID()) })
}

// pick reads, in id order, up to limit records keep selects, each as as makes it.
func pick[T any](s *Orders, limit int, keep func(*orderRecord) bool, as func(*orderRecord) T) []T {
	out := []T{}
	for _, r := range s.sorted() {
		if len(out) < limit && keep(r) {
			out = append(out, as(r))
		}
	}
	return out
}

func (s *Orders) Find(ctx context.Context, id domain.OrderID) (domain.OrderStatus, error) {
	return locked(ctx, &s.mu, func() (domain.OrderStatus, error) {
		if r, ok := s.orders[id]; ok {
			return r.OrderStatus, nil
		}
		return domain.OrderStatus{}, domain.ErrOrderNotFound
	})
}

func (s *Orders) Buyers(ctx context.Context, voucher domain.VoucherID) ([]domain.VoucherOrder, error) {
	return s.BuyersAfter(ctx, voucher, 0, math.MaxInt)
}

func (s *Orders) BuyersAfter(ctx context.Context, voucher domain.VoucherID, after domain.OrderID, limit int) ([]domain.VoucherOrder, error) {
	return locked(ctx, &s.mu, func() ([]domain.VoucherOrder, error) {
		return pick(s, limit, func(r *orderRecord) bool { return r.Order.VoucherID() == voucher && r.slot > 0 && r.Order.ID() > after },
			func(r *orderRecord) domain.VoucherOrder { return r.Place() }), nil
	})
}

func (s *Orders) CountBuyers(ctx context.Context, vouchers []domain.VoucherID) (map[domain.VoucherID]int, error) {
	return locked(ctx, &s.mu, func() (map[domain.VoucherID]int, error) {
		out := make(map[domain.VoucherID]int, len(vouchers))
		for _, v := range vouchers {
			out[v] = 0
		}
		for _, r := range s.orders {
			if n, ok := out[r.Order.VoucherID()]; ok && r.slot > 0 {
				out[r.Order.VoucherID()] = n + 1
			}
		}
		return out, nil
	})
}

func (s *Orders) Tally(ctx context.Context, id domain.VoucherID) (ports.SaleTally, error) {
	return locked(ctx, &s.mu, func() (ports.SaleTally, error) {
		stock, _, ok := s.vouchers.saleOf(id)
		if !ok {
			return ports.SaleTally{}, domain.ErrVoucherNotFound
		}
		t := ports.SaleTally{Stock: stock}
		counts := map[domain.OrderState]*int64{
			domain.OrderCreated: &t.Unpaid, domain.OrderPaid: &t.Paid, domain.OrderCancelled: &t.Cancelled,
			domain.OrderRefunding: &t.Refunding, domain.OrderFailed: &t.Failed,
		}
		for _, r := range s.orders {
			if r.Order.VoucherID() == id {
				*counts[r.State]++
			}
		}
		for _, p := range s.payments {
			if p.Order.VoucherID() != id || !p.kind.Owed() {
				continue
			}
			t.RefundsOwed++
			t.RefundsOwedFen += p.Amount
			if p.kind == domain.PaymentDouble {
				t.DoubleCharges++
			}
		}
		return t, nil
	})
}

func (s *Orders) OrdersAfter(ctx context.Context, voucher domain.VoucherID, filter domain.OrderFilter, after domain.OrderID, limit int) ([]domain.OrderStatus, error) {
	return locked(ctx, &s.mu, func() ([]domain.OrderStatus, error) {
		return pick(s, limit, func(r *orderRecord) bool {
			return r.Order.VoucherID() == voucher && r.Order.ID() > after && filter.Matches(r.OrderStatus)
		}, func(r *orderRecord) domain.OrderStatus { return r.OrderStatus }), nil
	})
}

func (s *Orders) ExpireDue(ctx context.Context, now time.Time, limit int) ([]ports.ExpiredOrder, error) {
	return locked(ctx, &s.mu, func() ([]ports.ExpiredOrder, error) {
		var due []ports.ExpiredOrder
		for _, r := range s.sorted() {
			if by := r.PayBy(); !by.IsZero() && !by.After(now) && len(due) < limit {
				due = append(due, ports.ExpiredOrder{Order: r.Order, Deadline: by})
				s.cancel(r, domain.CancelExpired)
			}
		}
		return due, nil
	})
}

// cancel moves a created order to cancelled and its unit back to stock; unless reclaim frees it,
// its place is forfeited and its slot stays taken.
func (s *Orders) cancel(r *orderRecord, reason domain.CancelReason) {
	r.State, r.CancelReason = domain.OrderCancelled, reason
	if s.reclaim {
		r.slot = 0
	}
	s.vouchers.take(r.Order.VoucherID(), -1)
}

// Unreturned lists the created orders that hold no unit and were not returned.
func (s *Orders) Unreturned(ctx context.Context, limit int) ([]domain.VoucherOrder, error) {
	return locked(ctx, &s.mu, func() ([]domain.VoucherOrder, error) {
		return pick(s, limit, func(r *orderRecord) bool { return !r.State.HoldsUnit() && r.State != domain.OrderFailed && !r.returned },
			func(r *orderRecord) domain.VoucherOrder { return r.Order }), nil
	})
}

func (s *Orders) Returned(ctx context.Context, ids []domain.OrderID) error {
	return s.mu.do(ctx, func() error {
		for _, id := range ids {
			if r, ok := s.orders[id]; ok && !r.State.HoldsUnit() {
				r.returned = true
			}
		}
		return nil
	})
}

func (s *Orders) Cancel(ctx context.Context, id domain.OrderID) (domain.OrderStatus, bool, error) {
	if err := s.mu.lock(ctx); err != nil {
		return domain.OrderStatus{}, false, err
	}
	defer s.mu.Unlock()
	r, ok := s.orders[id]
	if !ok {
		return domain.OrderStatus{}, false, domain.ErrOrderNotFound
	}
	if _, changed, err := r.State.AfterCancel(); err != nil || !changed {
		return r.OrderStatus, false, err
	}
	s.cancel(r, domain.CancelByBuyer)
	return r.OrderStatus, true, nil
}

func (s *Orders) Pay(ctx context.Context, p domain.Payment) (ports.PayResult, error) {
	return locked(ctx, &s.mu, func() (ports.PayResult, error) {
		r, ok := s.orders[p.Order.ID()]
		if !ok {
			return ports.PayResult{}, domain.ErrOrderNotFound
		}
		if seen, ok := s.payments[p.TransactionID]; ok {
			if seen.Order.ID() != r.Order.ID() {
				return ports.PayResult{}, domain.ErrTransactionReused
			}
			return ports.PayResult{Status: r.OrderStatus, Kind: seen.kind}, nil
		}
		kind, next, err := r.State.Pay()
		if err != nil {
			return ports.PayResult{}, err
		}
		if next != r.State {
			r.State, r.PaidAt = next, storedTime(p.At)
		}
		p.Order = r.Order
		s.payments[p.TransactionID] = payment{Payment: p, kind: kind}
		return ports.PayResult{Status: r.OrderStatus, Kind: kind, New: true}, nil
	})
}

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

// AddSeckillOnce stores the voucher, the key and the audit entry under one hold of the mutex,
// refusing in the SQL repository's order.
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

// addSeckill answers the voucher of a key already used; otherwise it stores the voucher, the key and the entry, if any.
func (s *Vouchers) addSeckill(ctx context.Context, key, fingerprint string, v domain.Voucher, entry domain.AuditEntry) (ports.Creation, error) {
	if !v.IsSeckill() {
		return ports.Creation{}, domain.ErrNotSeckill
	}
	return locked(ctx, &s.mu, func() (ports.Creation, error) {
		if k, ok := s.keys[key]; ok && key != "" {
			return ports.Creation{Voucher: s.vouchers[k.id-1], Fingerprint: k.fingerprint}, nil
		}
		saved := v.WithID(domain.VoucherID(len(s.vouchers) + 1)).WithSale(storedSale(v.Sale()))
		s.vouchers = append(s.vouchers, saved)
		if key != "" {
			s.keys[key] = voucherKey{id: saved.ID(), fingerprint: fingerprint}
		}
		if !entry.IsZero() {
			s.appendAudit(entry.ForVoucher(saved.ID()))
		}
		return ports.Creation{Voucher: saved, Fingerprint: fingerprint, Created: true}, nil
	})
}

// AddNormal stores a voucher without a sale, which the service never creates; for tests of listings that mix both kinds.
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

// saleOf is the remaining stock and the limit per user of a voucher that has a sale.
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

// storedSale and storedTime are a sale and a time as the database keeps them (UTC, to the microsecond).
func storedSale(s domain.Sale) domain.Sale {
	return s.WithStoredWindow(storedTime(s.Begin()), storedTime(s.End()))
}

func storedTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// AuditLog reads the trail of admin actions its Vouchers keep.
type AuditLog struct {
	v *Vouchers
}

func NewAuditLog(vouchers *Vouchers) *AuditLog { return &AuditLog{v: vouchers} }

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
