package application_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

const payWindow = time.Minute

// lifeWorld is a world whose orders expire after payWindow, with the
// lifecycle's use cases on a clock the test moves.
type lifeWorld struct {
	*world
	clock  *testenv.Clock
	audit  ports.GateAudit  // the memory gate under any wrapper
	index  ports.OrderIndex // the same
	expire *application.ExpireOrders
	cancel *application.CancelOrder
	pay    *application.PayOrder
}

func newLifeWorld(t *testing.T, wrap func(ports.StockGate) ports.StockGate) *lifeWorld {
	t.Helper()
	w := &lifeWorld{clock: testenv.NewClock(now)}
	w.world = newWorld(t, 100, func(g ports.StockGate) ports.StockGate {
		w.audit, w.index = g.(ports.GateAudit), g.(ports.OrderIndex)
		if wrap != nil {
			return wrap(g)
		}
		return g
	})
	w.orders.WithPayWindow(payWindow)
	w.expire = application.NewExpireOrders(w.orders, w.gate, w.clock, 100)
	w.cancel = application.NewCancelOrder(w.orders, w.orders, w.gate)
	w.pay = application.NewPayOrder(w.orders, w.vouchers, w.orders, w.index, w.clock, payWindow)
	return w
}

// sold claims one unit for user and writes it to the database.
func (w *lifeWorld) sold(t *testing.T, voucher domain.VoucherID, user domain.UserID) domain.OrderID {
	t.Helper()
	id, err := w.claim.Handle(context.Background(), user, voucher)
	if err != nil {
		t.Fatalf("claim of user %d: %v", user, err)
	}
	w.drain(t)
	return id
}

// stock is the database's and the gate's stock left.
func (w *lifeWorld) stock(t *testing.T, voucher domain.VoucherID) (db, gate int) {
	t.Helper()
	v, err := w.vouchers.Get(context.Background(), voucher)
	if err != nil {
		t.Fatal(err)
	}
	g, ok, err := w.audit.Stock(context.Background(), voucher)
	if err != nil || !ok {
		t.Fatalf("gate stock: %v %v", ok, err)
	}
	return v.Sale().Stock(), g
}

func (w *lifeWorld) state(t *testing.T, id domain.OrderID) domain.OrderStatus {
	t.Helper()
	st, err := w.orders.Find(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestExpireOrders(t *testing.T) {
	ctx := context.Background()
	w := newLifeWorld(t, nil)
	v := w.live(t, 2)
	unpaid, paid := w.sold(t, v, 1), w.sold(t, v, 2)
	if st := w.state(t, unpaid); st.State != domain.OrderCreated || !st.PayDeadline.Equal(now.Add(payWindow)) {
		t.Fatalf("new order = %+v, want created with deadline %s", st, now.Add(payWindow))
	}
	if _, err := w.pay.Handle(ctx, application.PaymentNotice{Order: paid, Amount: 1, TransactionID: "tx-2"}); err != nil {
		t.Fatal(err)
	}

	w.clock.Set(now.Add(payWindow - time.Second))
	if res, err := w.expire.Handle(ctx); err != nil || res.Expired != 0 {
		t.Fatalf("before the deadline: %+v, %v; want nothing expired", res, err)
	}
	w.clock.Set(now.Add(payWindow))
	res, err := w.expire.Handle(ctx)
	if err != nil || res != (application.ExpiryResult{Expired: 1, Returned: 1}) {
		t.Fatalf("at the deadline: %+v, %v; want one expired and returned", res, err)
	}
	if st := w.state(t, unpaid); st.State != domain.OrderCancelled || st.CancelReason != domain.CancelExpired {
		t.Fatalf("expired order = %+v", st)
	}
	if st := w.state(t, paid); st.State != domain.OrderPaid {
		t.Fatalf("paid order = %+v, a paid order never expires", st)
	}
	if db, gate := w.stock(t, v); db != 1 || gate != 1 {
		t.Fatalf("stock db=%d gate=%d, want the one unit back in both", db, gate)
	}
	if res, err := w.expire.Handle(ctx); err != nil || res != (application.ExpiryResult{}) {
		t.Fatalf("second pass: %+v, %v; want nothing", res, err)
	}
	// The expired order forfeited its buyer's place: a claim of theirs is
	// a duplicate, and the unit goes to someone else.
	if _, err := w.claim.Handle(ctx, 1, v); !errors.Is(err, domain.ErrAlreadyClaimed) {
		t.Fatalf("the expired order's buyer claims again: %v; want duplicate", err)
	}
	again := w.sold(t, v, 3)
	if again == unpaid || w.state(t, again).State != domain.OrderCreated {
		t.Fatalf("another buyer's claim = %d (%+v)", again, w.state(t, again))
	}
	if db, gate := w.stock(t, v); db != 0 || gate != 0 {
		t.Fatalf("stock db=%d gate=%d after the resale, want 0", db, gate)
	}
}

// onceFailingGate fails the first Return of each order and counts the
// returns that went through.
type onceFailingGate struct {
	ports.StockGate
	mu       sync.Mutex
	failed   map[domain.OrderID]bool
	released map[domain.OrderID]int
}

func (g *onceFailingGate) Return(ctx context.Context, orders []domain.VoucherOrder) error {
	g.mu.Lock()
	for _, o := range orders {
		if !g.failed[o.ID()] {
			g.failed[o.ID()] = true
			g.mu.Unlock()
			return errors.New("injected: crash after the database, before Redis")
		}
	}
	for _, o := range orders {
		g.released[o.ID()]++
	}
	g.mu.Unlock()
	return g.StockGate.Return(ctx, orders)
}

func TestExpireOrdersFinishesAfterAGateFailure(t *testing.T) {
	ctx := context.Background()
	var fg *onceFailingGate
	w := newLifeWorld(t, func(g ports.StockGate) ports.StockGate {
		fg = &onceFailingGate{StockGate: g, failed: map[domain.OrderID]bool{}, released: map[domain.OrderID]int{}}
		return fg
	})
	v := w.live(t, 1)
	id := w.sold(t, v, 1)
	w.clock.Set(now.Add(payWindow + time.Second))
	res, err := w.expire.Handle(ctx)
	if err == nil || res.Expired != 1 || res.Returned != 0 {
		t.Fatalf("first pass: %+v, %v; want expired in the database, the gate's release failed", res, err)
	}
	if db, gate := w.stock(t, v); db != 1 || gate != 0 {
		t.Fatalf("after the failure db=%d gate=%d, want 1 and 0", db, gate)
	}
	res, err = w.expire.Handle(ctx)
	if err != nil || res != (application.ExpiryResult{Returned: 1}) {
		t.Fatalf("second pass: %+v, %v; want the unit returned", res, err)
	}
	for range 2 {
		if res, err := w.expire.Handle(ctx); err != nil || res != (application.ExpiryResult{}) {
			t.Fatalf("later pass: %+v, %v; want nothing", res, err)
		}
	}
	if db, gate := w.stock(t, v); db != 1 || gate != 1 || fg.released[id] != 1 {
		t.Fatalf("db=%d gate=%d releases=%d, want the unit back once", db, gate, fg.released[id])
	}
}

func TestCancelOrder(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID
		user      domain.UserID
		wantErr   error
		wantState domain.OrderState
		wantStock int // database and gate
	}{
		{name: "unpaid", setup: func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID {
			return w.sold(t, v, 1)
		}, user: 1, wantState: domain.OrderCancelled, wantStock: 1},
		{name: "cancelled_again", setup: func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID {
			id := w.sold(t, v, 1)
			if _, err := w.cancel.Handle(context.Background(), 1, id); err != nil {
				t.Fatal(err)
			}
			return id
		}, user: 1, wantState: domain.OrderCancelled, wantStock: 1},
		{name: "paid", setup: func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID {
			id := w.sold(t, v, 1)
			if _, err := w.pay.Handle(context.Background(), application.PaymentNotice{Order: id, Amount: 1, TransactionID: "t"}); err != nil {
				t.Fatal(err)
			}
			return id
		}, user: 1, wantErr: domain.ErrAlreadyPaid, wantState: domain.OrderPaid},
		{name: "someone_elses", setup: func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID {
			return w.sold(t, v, 1)
		}, user: 2, wantErr: domain.ErrOrderNotFound, wantState: domain.OrderCreated},
		{name: "queued", setup: func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID {
			id, err := w.claim.Handle(context.Background(), 1, v)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}, user: 1, wantErr: application.ErrBusy, wantState: domain.OrderCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newLifeWorld(t, nil)
			v := w.live(t, 1)
			id := tt.setup(t, w, v)
			st, err := w.cancel.Handle(context.Background(), tt.user, id)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && (st.State != tt.wantState || st.CancelReason != domain.CancelByBuyer) {
				t.Fatalf("answer = %+v", st)
			}
			w.drain(t) // a queued order reaches the database: still created
			if got := w.state(t, id).State; got != tt.wantState {
				t.Fatalf("recorded state = %s, want %s", got, tt.wantState)
			}
			if db, gate := w.stock(t, v); db != tt.wantStock || gate != tt.wantStock {
				t.Fatalf("stock db=%d gate=%d, want %d", db, gate, tt.wantStock)
			}
		})
	}
}

func TestPayOrder(t *testing.T) {
	paidWith := func(tx string) func(*testing.T, *lifeWorld, domain.VoucherID) domain.OrderID {
		return func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID {
			id := soldTo(1)(t, w, v)
			if _, err := w.pay.Handle(context.Background(), application.PaymentNotice{Order: id, Amount: 1, TransactionID: tx}); err != nil {
				t.Fatal(err)
			}
			return id
		}
	}
	expired := func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID {
		id := soldTo(1)(t, w, v)
		w.clock.Set(now.Add(payWindow))
		if _, err := w.expire.Handle(context.Background()); err != nil {
			t.Fatal(err)
		}
		w.sold(t, v, 2) // the returned unit is sold again
		return id
	}
	tests := []struct {
		name      string
		setup     func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID
		amount    int64
		wantErr   any // error to errors.Is, or a *domain.ValidationError
		wantState domain.OrderState
		wantKind  domain.PaymentKind
		wantNew   bool
		wantStock int
		wantOwed  int64 // payments owed back, in the voucher's tally
	}{
		{name: "unpaid", setup: soldTo(1), amount: 1, wantState: domain.OrderPaid, wantKind: domain.PaymentSettled, wantNew: true},
		{name: "same_notification_again", setup: paidWith("tx"), amount: 1, wantState: domain.OrderPaid, wantKind: domain.PaymentSettled},
		{name: "another_transaction_on_a_paid_order_is_a_double_charge", setup: paidWith("tx-1"), amount: 1,
			wantState: domain.OrderPaid, wantKind: domain.PaymentDouble, wantNew: true, wantOwed: 1},
		{name: "wrong_amount", setup: soldTo(1), amount: 2, wantErr: &domain.ValidationError{}, wantState: domain.OrderCreated},
		{name: "after_expiry_refunds", setup: expired, amount: 1, wantState: domain.OrderRefunding, wantKind: domain.PaymentLate, wantNew: true, wantOwed: 1},
		{name: "another_transaction_on_a_refunding_order_is_owed_too", setup: func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID {
			id := expired(t, w, v)
			if _, err := w.pay.Handle(context.Background(), application.PaymentNotice{Order: id, Amount: 1, TransactionID: "tx-1"}); err != nil {
				t.Fatal(err)
			}
			return id
		}, amount: 1, wantState: domain.OrderRefunding, wantKind: domain.PaymentDouble, wantNew: true, wantOwed: 2},
		{name: "a_failed_order_is_recorded_as_owed_back", setup: func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID {
			o := testenv.Order(t, soldTo(1)(t, w, v)+1, 9, v)
			if _, err := w.orders.MarkFailed(context.Background(), []domain.VoucherOrder{o}, domain.FailOutOfStock); err != nil {
				t.Fatal(err)
			}
			return o.ID()
		}, amount: 1, wantState: domain.OrderFailed, wantKind: domain.PaymentUnsold, wantNew: true, wantOwed: 1},
		{name: "a_transaction_recorded_for_another_order", setup: func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID {
			paidWith("tx")(t, w, v)
			w.clock.Set(now) // the first buyer's order paid with tx; the second is unpaid
			return w.sold(t, w.live(t, 1), 2)
		}, amount: 1, wantErr: &domain.ValidationError{}, wantState: domain.OrderCreated},
		{name: "unknown_old_order", setup: func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID {
			w.clock.Set(now.Add(2 * payWindow))
			return soldTo(1)(t, w, v) + 1000
		}, amount: 1, wantErr: domain.ErrOrderNotFound},
		{name: "unknown_recent_may_be_queued", setup: func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID {
			id, err := w.claim.Handle(context.Background(), 1, v)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}, amount: 1, wantErr: application.ErrBusy, wantState: domain.OrderCreated},
		// Still queued past the window (the database slow or down that
		// long): retried, not refused as unknown, or the provider would stop
		// and the money never be recorded.
		{name: "queued_past_the_window_is_retried", setup: func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID {
			id, err := w.claim.Handle(context.Background(), 1, v)
			if err != nil {
				t.Fatal(err)
			}
			w.clock.Set(now.Add(2 * payWindow))
			return id
		}, amount: 1, wantErr: application.ErrBusy, wantState: domain.OrderCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newLifeWorld(t, nil)
			v := w.live(t, 1)
			id := tt.setup(t, w, v)
			res, err := w.pay.Handle(context.Background(), application.PaymentNotice{Order: id, Amount: tt.amount, TransactionID: "tx"})
			switch want := tt.wantErr.(type) {
			case nil:
				if err != nil || res.Status.State != tt.wantState || res.Kind != tt.wantKind || res.New != tt.wantNew {
					t.Fatalf("got (%+v, %v), want %s kind %s new=%v", res, err, tt.wantState, tt.wantKind, tt.wantNew)
				}
			case *domain.ValidationError:
				if !errors.As(err, &want) {
					t.Fatalf("err = %v, want a validation error", err)
				}
			case error:
				if !errors.Is(err, want) {
					t.Fatalf("err = %v, want %v", err, want)
				}
			}
			w.drain(t)
			if tt.wantState != "" {
				if got := w.state(t, id); got.State != tt.wantState {
					t.Fatalf("recorded %s, want %s", got.State, tt.wantState)
				}
			}
			if db, gate := w.stock(t, v); db != tt.wantStock || gate != tt.wantStock {
				t.Fatalf("stock db=%d gate=%d, want %d (a late payment never resurrects a unit)", db, gate, tt.wantStock)
			}
			tally, err := w.orders.Tally(context.Background(), v)
			if err != nil || tally.RefundsOwed != tt.wantOwed || tally.RefundsOwedFen != tt.wantOwed {
				t.Fatalf("tally %+v (%v), want %d payments (%d fen) owed back", tally, err, tt.wantOwed, tt.wantOwed)
			}
		})
	}
}

func soldTo(user domain.UserID) func(*testing.T, *lifeWorld, domain.VoucherID) domain.OrderID {
	return func(t *testing.T, w *lifeWorld, v domain.VoucherID) domain.OrderID { return w.sold(t, v, user) }
}

// A payment racing its order's expiry: exactly one of them applies first,
// every round; the unit is returned only when the expiry won.
func TestPaymentRacesExpiry(t *testing.T) {
	ctx := context.Background()
	for round := range 300 {
		w := newLifeWorld(t, nil)
		v := w.live(t, 1)
		id := w.sold(t, v, 1)
		w.clock.Set(now.Add(payWindow))
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); <-start; _, _ = w.expire.Handle(ctx) }()
		go func() {
			defer wg.Done()
			<-start
			_, _ = w.pay.Handle(ctx, application.PaymentNotice{Order: id, Amount: 1, TransactionID: "tx"})
		}()
		close(start)
		wg.Wait()
		st := w.state(t, id)
		db, gate := w.stock(t, v)
		switch {
		case st.State == domain.OrderPaid && db == 0 && gate == 0:
		case st.State == domain.OrderRefunding && st.CancelReason == domain.CancelExpired && db == 1 && gate == 1:
		default:
			t.Fatalf("round %d: %+v with stock db=%d gate=%d", round, st, db, gate)
		}
	}
}

// Reconcile counts the orders by state and keeps the invariant on both
// sides once an expired order's unit is back.
func TestReconcileKnowsTheLifecycle(t *testing.T) {
	ctx := context.Background()
	w := newLifeWorld(t, nil)
	v := w.live(t, 3)
	paid := w.sold(t, v, 1)
	w.sold(t, v, 2)
	if _, err := w.pay.Handle(ctx, application.PaymentNotice{Order: paid, Amount: 1, TransactionID: "t"}); err != nil {
		t.Fatal(err)
	}
	w.clock.Set(now.Add(payWindow))
	if _, err := w.expire.Handle(ctx); err != nil {
		t.Fatal(err)
	}
	w.sold(t, v, 3)
	rep, err := application.NewReconcileVoucher(w.vouchers, w.orders, w.audit, nil).Check(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	want := ports.SaleTally{Stock: 1, Unpaid: 1, Paid: 1, Cancelled: 1}
	if !rep.Consistent() || rep.Unaccounted() != 0 || !rep.HasBooks || rep.Books != want {
		t.Fatalf("report %+v, want consistent, balanced, books %+v", rep, want)
	}
}

// buyersHook runs after once after the first BuyersAfter read: the moment
// between the repair's database read and its heal script.
type buyersHook struct {
	ports.OrderRepository
	once  sync.Once
	after func()
}

func (h *buyersHook) BuyersAfter(ctx context.Context, v domain.VoucherID, after domain.OrderID, limit int) ([]domain.VoucherOrder, error) {
	page, err := h.OrderRepository.BuyersAfter(ctx, v, after, limit)
	h.once.Do(h.after)
	return page, err
}

// The heal/expiry race: the periodic repair reads a voucher's buyers from
// the database, an expiry commits and returns the unit before the repair's
// heal runs, and the heal must not put the expired order's mark back (the
// gate would be one unit short for good, its return already recorded, and
// the buyer unable to claim again). The repair has real work too (one
// forgotten order), so its exact diff runs.
func TestRepairDoesNotResurrectAnOrderExpiredDuringIt(t *testing.T) {
	ctx := context.Background()
	w := newLifeWorld(t, nil)
	v := w.live(t, 5)
	expiring := w.sold(t, v, 1)
	forgotten := w.sold(t, v, 2) // paid: survives the expiry
	if _, err := w.pay.Handle(ctx, application.PaymentNotice{Order: forgotten, Amount: 1, TransactionID: "t"}); err != nil {
		t.Fatal(err)
	}
	mg := w.audit.(*memory.Gate)
	lost, err := domain.NewVoucherOrder(forgotten, 2, v)
	if err != nil {
		t.Fatal(err)
	}
	mg.Lose(lost)
	hook := &buyersHook{OrderRepository: w.orders, after: func() {
		w.clock.Set(now.Add(payWindow + time.Second))
		if res, err := w.expire.Handle(ctx); err != nil || res.Expired != 1 || res.Returned != 1 {
			t.Errorf("expiry during the repair: %+v, %v; want order %d expired and returned", res, err, expiring)
		}
	}}
	repair := application.NewRestoreGate(w.vouchers, hook, mg, mg, w.clock)
	rep, err := repair.Repair(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []application.HealedVoucher{{Voucher: v, Healed: ports.Healed{Restored: 1, Retaken: 1}}}
	if len(rep.Healed) != 1 || rep.Healed[0] != want[0] {
		t.Fatalf("healed %+v, want only the forgotten order: %+v", rep.Healed, want)
	}
	if db, gate := w.stock(t, v); db != 4 || gate != 4 {
		t.Fatalf("stock db=%d gate=%d, want 4 and 4 (5 - the forgotten order's unit)", db, gate)
	}
	if b, _ := mg.Buyers(ctx, v); len(b) != 1 || b[forgotten] != 2 {
		t.Fatalf("gate buyers %v, want only user 2's order %d", b, forgotten)
	}
	// The expired buyer's place is forfeited; its unit is on sale.
	if _, err := w.claim.Handle(ctx, 1, v); !errors.Is(err, domain.ErrAlreadyClaimed) {
		t.Fatalf("the expired buyer claims again: %v; want duplicate", err)
	}
	if again := w.sold(t, v, 3); w.state(t, again).State != domain.OrderCreated {
		t.Fatalf("another buyer's claim: %+v", w.state(t, again))
	}
}
