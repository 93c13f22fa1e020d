package application_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

var now = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)

// world is one service built on the memory fakes.
type world struct {
	vouchers *memory.Vouchers
	orders   *memory.Orders
	gate     ports.StockGate
	queue    *chanqueue.Queue
	claim    *application.ClaimSeckill
	// ids is the claim's order-id source; a test that claims through
	// another admission shares its sequence (ids.Sharing), as a second
	// instance shares the Redis counter, so no two orders share an id.
	ids     *memory.IDs
	fulfill *application.FulfillOrders
	get     *application.GetOrder
	add     *application.AddSeckillVoucher
}

func newWorld(t *testing.T, queueCap int, wrap func(ports.StockGate) ports.StockGate) *world {
	t.Helper()
	w := &world{vouchers: memory.NewVouchers(), queue: chanqueue.New(queueCap, 0)}
	w.orders = memory.NewOrders(w.vouchers)
	var gate ports.StockGate = memory.NewGate(testenv.NewClock(now))
	if wrap != nil {
		gate = wrap(gate)
	}
	w.gate = gate
	w.ids = memory.NewIDs(testenv.NewClock(now))
	w.claim = application.NewClaimSeckill(w.ids, chanqueue.NewAdmission(gate, w.queue))
	w.fulfill = application.NewFulfillOrders(w.orders, gate)
	w.get = application.NewGetOrder(w.orders, gate)
	w.add = application.NewAddSeckillVoucher(w.vouchers, w.orders, gate)
	return w
}

func (w *world) voucher(t *testing.T, stock int, begin, end time.Time) domain.VoucherID {
	t.Helper()
	sale, err := domain.NewSale(stock, begin, end)
	if err != nil {
		t.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "t", PayValue: 1, ActualValue: 2}, sale)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := w.add.Handle(context.Background(), testAdmin, v)
	if err != nil {
		t.Fatal(err)
	}
	return saved.ID()
}

func (w *world) live(t *testing.T, stock int) domain.VoucherID {
	return w.voucher(t, stock, now.Add(-time.Hour), now.Add(time.Hour))
}

// drain runs what the worker runs: receive everything queued, fulfil it.
func (w *world) drain(t *testing.T) application.BatchResult {
	t.Helper()
	var total application.BatchResult
	for w.queue.Len() > 0 {
		ds, err := w.queue.Receive(context.Background(), 100)
		if err != nil {
			t.Fatal(err)
		}
		orders := make([]domain.VoucherOrder, len(ds))
		for i, d := range ds {
			orders[i] = d.Order
		}
		res, err := w.fulfill.Handle(context.Background(), orders)
		if err != nil {
			t.Fatal(err)
		}
		total.Created += res.Created
		total.Replayed += res.Replayed
		total.Failed = append(total.Failed, res.Failed...)
	}
	return total
}

func TestClaimSeckill(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, w *world) domain.VoucherID
		user    domain.UserID
		wantErr error
	}{
		{name: "success", setup: func(t *testing.T, w *world) domain.VoucherID { return w.live(t, 1) }, user: 7},
		{name: "not_found", setup: func(*testing.T, *world) domain.VoucherID { return 999 }, user: 7, wantErr: domain.ErrVoucherNotFound},
		{name: "not_started", setup: func(t *testing.T, w *world) domain.VoucherID {
			return w.voucher(t, 5, now.Add(time.Minute), now.Add(time.Hour))
		}, user: 7, wantErr: domain.ErrNotStarted},
		{name: "ended", setup: func(t *testing.T, w *world) domain.VoucherID {
			return w.voucher(t, 5, now.Add(-time.Hour), now)
		}, user: 7, wantErr: domain.ErrEnded},
		{name: "sold_out", setup: func(t *testing.T, w *world) domain.VoucherID {
			id := w.live(t, 1)
			if _, err := w.claim.Handle(context.Background(), 1, id); err != nil {
				t.Fatal(err)
			}
			return id
		}, user: 7, wantErr: domain.ErrSoldOut},
		{name: "duplicate", setup: func(t *testing.T, w *world) domain.VoucherID {
			id := w.live(t, 5)
			if _, err := w.claim.Handle(context.Background(), 7, id); err != nil {
				t.Fatal(err)
			}
			return id
		}, user: 7, wantErr: domain.ErrAlreadyClaimed},
		{name: "invalid_user", setup: func(t *testing.T, w *world) domain.VoucherID { return w.live(t, 5) }, user: 0,
			wantErr: &domain.ValidationError{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, 10, nil)
			vid := tt.setup(t, w)
			queued := w.queue.Len()
			id, err := w.claim.Handle(context.Background(), tt.user, vid)
			if tt.wantErr != nil {
				var ve *domain.ValidationError
				if errors.As(tt.wantErr, &ve) {
					if !errors.As(err, &ve) {
						t.Fatalf("err = %v, want a ValidationError", err)
					}
				} else if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if w.queue.Len() != queued {
					t.Fatalf("a refused claim queued an order")
				}
				return
			}
			if err != nil || id <= 0 {
				t.Fatalf("claim = %d, %v", id, err)
			}
			st, err := w.get.Handle(context.Background(), tt.user, id)
			if err != nil || st.State != domain.OrderQueued || st.Order.VoucherID() != vid {
				t.Fatalf("status after claim = %+v, %v; want queued", st, err)
			}
		})
	}
}

func TestClaimSeckillQueueFullRollsBack(t *testing.T) {
	w := newWorld(t, 1, nil)
	vid := w.live(t, 2)
	if _, err := w.claim.Handle(context.Background(), 1, vid); err != nil {
		t.Fatal(err)
	}
	_, err := w.claim.Handle(context.Background(), 2, vid)
	if !errors.Is(err, application.ErrBusy) || !errors.Is(err, ports.ErrQueueFull) {
		t.Fatalf("err = %v, want ErrBusy from ErrQueueFull", err)
	}
	// The refused user's reservation is gone: once there is room they can claim,
	// and the unit they did not get is still for sale.
	w.drain(t)
	if _, err := w.claim.Handle(context.Background(), 2, vid); err != nil {
		t.Fatalf("claim after rollback: %v", err)
	}
	if _, err := w.claim.Handle(context.Background(), 3, vid); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("third claim = %v, want sold out (stock 2)", err)
	}
}

// flakyGate fails Reserve after doing it, like a reply lost on the network.
type flakyGate struct {
	ports.StockGate
	reserveErr error
	releases   int
}

func (g *flakyGate) Reserve(ctx context.Context, o domain.VoucherOrder) error {
	if err := g.StockGate.Reserve(ctx, o); err != nil {
		return err
	}
	return g.reserveErr
}

func (g *flakyGate) Release(ctx context.Context, o domain.VoucherOrder, restore bool) error {
	g.releases++
	return g.StockGate.Release(ctx, o, restore)
}

func TestClaimSeckillAmbiguousReserveIsReleased(t *testing.T) {
	fg := &flakyGate{reserveErr: errors.New("i/o timeout")}
	w := newWorld(t, 10, func(g ports.StockGate) ports.StockGate { fg.StockGate = g; return fg })
	vid := w.live(t, 1)
	if _, err := w.claim.Handle(context.Background(), 1, vid); err == nil || fg.releases != 1 {
		t.Fatalf("err = %v, releases = %d; want an error and one release", err, fg.releases)
	}
	if w.queue.Len() != 0 {
		t.Fatal("an unconfirmed claim was queued")
	}
	fg.reserveErr = nil
	if _, err := w.claim.Handle(context.Background(), 2, vid); err != nil {
		t.Fatalf("the released unit must be for sale again: %v", err)
	}
}

func TestClaimSeckillRefusesAGoneCaller(t *testing.T) {
	w := newWorld(t, 10, nil)
	vid := w.live(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.claim.Handle(ctx, 1, vid); !errors.Is(err, context.Canceled) {
		t.Fatalf("a claim whose caller is gone before it starts = %v, want context.Canceled", err)
	}
	if w.queue.Len() != 0 {
		t.Fatal("a cancelled claim was queued")
	}
}

func TestFulfillOrders(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 100, nil)
	vid := w.live(t, 3)
	var ids []domain.OrderID
	for u := domain.UserID(1); u <= 3; u++ {
		id, err := w.claim.Handle(ctx, u, vid)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	res := w.drain(t)
	if res.Created != 3 || len(res.Failed) != 0 {
		t.Fatalf("result %+v, want 3 created", res)
	}
	for i, id := range ids {
		st, err := w.get.Handle(ctx, domain.UserID(i+1), id)
		if err != nil || st.State != domain.OrderCreated {
			t.Fatalf("order %d: %+v, %v; want created", id, st, err)
		}
	}

	t.Run("redelivery_is_a_no_op", func(t *testing.T) {
		o, _ := domain.NewVoucherOrder(ids[0], 1, vid)
		res, err := w.fulfill.Handle(ctx, []domain.VoucherOrder{o})
		if err != nil || res.Replayed != 1 || res.Created != 0 {
			t.Fatalf("replay = %+v, %v", res, err)
		}
	})

	t.Run("out_of_stock_in_database_fails_and_frees_the_user", func(t *testing.T) {
		// Redis believed there was stock the database does not have (a stale gate).
		o, _ := domain.NewVoucherOrder(ids[2]+100, 50, vid)
		res, err := w.fulfill.Handle(ctx, []domain.VoucherOrder{o})
		if err != nil || len(res.Failed) != 1 || res.Failed[0].Reason != domain.FailOutOfStock {
			t.Fatalf("result %+v, %v; want one out_of_stock failure", res, err)
		}
		st, err := w.get.Handle(ctx, 50, o.ID())
		if err != nil || st.State != domain.OrderFailed || st.Reason != domain.FailOutOfStock {
			t.Fatalf("status %+v, %v; want failed out_of_stock", st, err)
		}
	})
}

// failingGate's Release fails, as Redis down after the database committed.
type failingGate struct{ ports.StockGate }

func (failingGate) Release(context.Context, domain.VoucherOrder, bool) error {
	return errors.New("redis down")
}

func TestFulfillOrdersReleaseFailureAsksForRetry(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 10, func(g ports.StockGate) ports.StockGate { return failingGate{g} })
	vid := w.live(t, 1)
	if _, err := w.claim.Handle(ctx, 1, vid); err != nil {
		t.Fatal(err)
	}
	w.drain(t)
	o, _ := domain.NewVoucherOrder(12345, 2, vid) // the database has no stock left for it
	if _, err := w.fulfill.Handle(ctx, []domain.VoucherOrder{o}); err == nil {
		t.Fatal("a failed release must be reported so the batch is retried")
	}
	// The retry is safe: the failure is recorded once.
	st, err := w.orders.Find(ctx, o.ID())
	if err != nil || st.State != domain.OrderFailed {
		t.Fatalf("failure not recorded: %+v, %v", st, err)
	}
}

func TestGetOrderHidesOtherUsersOrders(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 10, nil)
	vid := w.live(t, 2)
	id, err := w.claim.Handle(ctx, 1, vid)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		user  domain.UserID
		id    domain.OrderID
		drain bool
		want  error
	}{
		{name: "queued_other_user", user: 2, id: id, want: domain.ErrOrderNotFound},
		{name: "unknown_id", user: 1, id: id + 1, want: domain.ErrOrderNotFound},
		{name: "created_other_user", user: 2, id: id, drain: true, want: domain.ErrOrderNotFound},
		{name: "created_owner", user: 1, id: id, drain: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.drain {
				w.drain(t)
			}
			_, err := w.get.Handle(ctx, tt.user, tt.id)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestAddSeckillVoucherRejectsNormalVouchers(t *testing.T) {
	w := newWorld(t, 1, nil)
	if _, err := w.add.Handle(context.Background(), testAdmin, domain.Voucher{}); err == nil {
		t.Fatal("a voucher without a sale must be refused")
	}
	vs, _ := w.vouchers.ListByShop(context.Background(), 1, application.MaxShopVouchers)
	if len(vs) != 0 {
		t.Fatalf("a refused voucher was stored: %v", vs)
	}
}

func TestRestoreGate(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 10, nil)
	vid := w.live(t, 3)
	if _, err := w.claim.Handle(ctx, 1, vid); err != nil {
		t.Fatal(err)
	}
	w.drain(t)
	ended := w.voucher(t, 3, now.Add(-3*time.Hour), now.Add(-2*time.Hour))

	// A fresh gate, as after a Redis restart, restored from the database.
	fresh := memory.NewGate(testenv.NewClock(now))
	rep, err := application.NewRestoreGate(w.vouchers, w.orders, fresh, fresh, testenv.NewClock(now)).Repair(ctx)
	if err != nil || rep.Restored != 1 || len(rep.Healed) != 0 {
		t.Fatalf("restored %+v, %v; want 1 (the ended sale is skipped), nothing healed", rep, err)
	}
	claim := application.NewClaimSeckill(w.ids.Sharing(testenv.NewClock(now)), chanqueue.NewAdmission(fresh, chanqueue.New(10, 0)))
	if _, err := claim.Handle(ctx, 1, vid); !errors.Is(err, domain.ErrAlreadyClaimed) {
		t.Fatalf("a buyer in the database must stay a buyer: %v", err)
	}
	for u := domain.UserID(2); u <= 3; u++ {
		if _, err := claim.Handle(ctx, u, vid); err != nil {
			t.Fatalf("user %d: %v", u, err)
		}
	}
	if _, err := claim.Handle(ctx, 4, vid); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("stock must be what the database has left: %v", err)
	}
	if _, err := claim.Handle(ctx, 4, ended); !errors.Is(err, domain.ErrVoucherNotFound) {
		t.Fatalf("an ended sale is not restored: %v", err)
	}
}

func TestConstructorsRefuseNilDependencies(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
	mustPanic("claim_without_admission", func() {
		application.NewClaimSeckill(memory.NewIDs(testenv.NewClock(now)), nil)
	})
	mustPanic("claim_with_a_typed_nil_admission", func() {
		var adm *chanqueue.Admission
		application.NewClaimSeckill(memory.NewIDs(testenv.NewClock(now)), adm)
	})
	mustPanic("fulfill_without_gate", func() { application.NewFulfillOrders(memory.NewOrders(memory.NewVouchers()), nil) })
	mustPanic("get_without_orders", func() { application.NewGetOrder(nil, memory.NewGate(testenv.NewClock(now))) })
	mustPanic("sale_dashboard_without_claim_counts", func() {
		v := memory.NewVouchers()
		g := memory.NewGate(testenv.NewClock(now))
		application.NewSaleDashboard(v, g, memory.NewOrders(v), chanqueue.New(1, 0), nil,
			application.NewRoomDirectory(memory.NewRooms(g), testenv.NewClock(now)), testenv.NewClock(now))
	})
}

func TestClaimSeckillOutOfTimeIsBusyAndUndone(t *testing.T) {
	fg := &flakyGate{reserveErr: context.DeadlineExceeded}
	w := newWorld(t, 10, func(g ports.StockGate) ports.StockGate { fg.StockGate = g; return fg })
	vid := w.live(t, 1)
	_, err := w.claim.Handle(context.Background(), 1, vid)
	if !errors.Is(err, application.ErrBusy) || fg.releases != 1 {
		t.Fatalf("err = %v, releases = %d; want ErrBusy after one release", err, fg.releases)
	}
	fg.reserveErr = nil
	if _, err := w.claim.Handle(context.Background(), 1, vid); err != nil {
		t.Fatalf("the busy user must be able to try again: %v", err)
	}
}

func TestFulfillOrdersReject(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 10, nil)
	vid := w.live(t, 3)
	createdID, err := w.claim.Handle(ctx, 1, vid)
	if err != nil {
		t.Fatal(err)
	}
	w.drain(t)
	poisonID, err := w.claim.Handle(ctx, 2, vid)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := w.queue.Receive(ctx, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v, %v", ds, err)
	}
	created, _ := domain.NewVoucherOrder(createdID, 1, vid)
	res, err := w.fulfill.Reject(ctx, []domain.VoucherOrder{created, ds[0].Order}, domain.FailUndeliverable)
	if err != nil || res.Replayed != 1 || len(res.Failed) != 1 {
		t.Fatalf("reject = %+v, %v; want the created order kept and one failure", res, err)
	}
	st, err := w.get.Handle(ctx, 2, poisonID)
	if err != nil || st.State != domain.OrderFailed || st.Reason != domain.FailUndeliverable {
		t.Fatalf("rejected order status %+v, %v", st, err)
	}
	// The rejected user holds no order, so the gate let them go, and the
	// unit the database never sold is for sale again: 2 are left, not 1.
	for u := domain.UserID(2); u <= 3; u++ {
		if _, err := w.claim.Handle(ctx, u, vid); err != nil {
			t.Fatalf("user %d claims after the rejection: %v", u, err)
		}
	}
	if _, err := w.claim.Handle(ctx, 4, vid); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("stock must match the database's: %v", err)
	}
}

// unknownAdmission reserves in the gate, then reports a failure that does not
// say whether it took the order, as the Stream driver does when Redis fails
// after the script may have run.
type unknownAdmission struct{ gate ports.StockGate }

func (a unknownAdmission) Admit(ctx context.Context, o domain.VoucherOrder) error {
	if err := a.gate.Reserve(ctx, o); err != nil {
		return err
	}
	return errors.New("i/o timeout (outcome unknown)")
}

func TestClaimSeckillUnknownOutcomeIsNeitherBusyNorRefusedAndKeepsItsID(t *testing.T) {
	gate := memory.NewGate(testenv.NewClock(now))
	ids := memory.NewIDs(testenv.NewClock(now))
	w := newWorld(t, 10, func(ports.StockGate) ports.StockGate { return gate })
	claim := application.NewClaimSeckill(ids, unknownAdmission{gate})
	vid := w.live(t, 2)
	_, err := claim.Handle(context.Background(), 1, vid)
	if !errors.Is(err, application.ErrOutcomeUnknown) || errors.Is(err, application.ErrBusy) || domain.IsRefusal(err) {
		t.Fatalf("err = %v; want an unknown-outcome error, neither busy nor a refusal", err)
	}
	// The client is told the order's ID, to ask its status.
	var unknown *application.OutcomeUnknownError
	if !errors.As(err, &unknown) || unknown.Order.Seq() != 1 {
		t.Fatalf("err = %#v; want an *OutcomeUnknownError carrying the order's ID (sequence 1)", err)
	}
	// The admission may have taken the order: its ID must not go to anyone else.
	next, err := ids.Next(context.Background())
	if err != nil || next.Seq() != 2 {
		t.Fatalf("next id = %v (seq %d), %v; want sequence 2, the unknown claim's ID kept", next, next.Seq(), err)
	}
}

// failingIDs is an order-id source whose Redis is down.
type failingIDs struct{ ports.OrderIDs }

func (failingIDs) Next(context.Context) (domain.OrderID, error) {
	return 0, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
}

func TestClaimSeckillIsBusyWhenNoOrderIDCanBeIssued(t *testing.T) {
	w := newWorld(t, 10, nil)
	vid := w.live(t, 2)
	counts := metrics.NewClaimCounter()
	claim := application.NewClaimSeckill(failingIDs{memory.NewIDs(testenv.NewClock(now))}, countingAdmission{}).WithRecorder(counts)
	_, err := claim.Handle(context.Background(), 1, vid)
	// Nothing was reserved: the client may retry, and must not see a 500.
	if !errors.Is(err, application.ErrBusy) || errors.Is(err, application.ErrOutcomeUnknown) {
		t.Fatalf("err = %v; want busy", err)
	}
	// The live sale page counts it as the client was answered: busy.
	if got := counts.Claims(vid); got[metrics.OutcomeBusy] != 1 || got[metrics.OutcomeError] != 0 {
		t.Fatalf("the page's counts %v; want the claim counted busy", got)
	}
}

// countingAdmission fails a test that reaches it.
type countingAdmission struct{}

func (countingAdmission) Admit(context.Context, domain.VoucherOrder) error {
	panic("the admission must not run without an order id")
}

func TestRefusedClaimsSpendNoOrderID(t *testing.T) {
	w := newWorld(t, 10, nil)
	sold := w.live(t, 1)
	first, err := w.claim.Handle(context.Background(), 1, sold)
	if err != nil {
		t.Fatal(err)
	}
	future := w.voucher(t, 1, now.Add(time.Hour), now.Add(2*time.Hour))
	refusals := []struct {
		user    domain.UserID
		voucher domain.VoucherID
		want    error
	}{
		{2, sold, domain.ErrSoldOut},
		{1, sold, domain.ErrSoldOut},
		{3, future, domain.ErrNotStarted},
		{3, 999, domain.ErrVoucherNotFound},
	}
	for range 50 {
		for _, r := range refusals {
			if _, err := w.claim.Handle(context.Background(), r.user, r.voucher); !errors.Is(err, r.want) {
				t.Fatalf("claim(%d, %d) = %v, want %v", r.user, r.voucher, err, r.want)
			}
		}
	}
	second, err := w.claim.Handle(context.Background(), 4, w.live(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if first.Seq() != 1 || second.Seq() != 2 {
		t.Fatalf("sequences %d, %d after 200 refusals; want 1, 2: refusals spent IDs", first.Seq(), second.Seq())
	}
}

// A running instance heals a gate Redis lost, from the database, without a
// restart: Repair restores only what the probe reports missing, and leaves
// a gate that holds reservations alone.
func TestRestoreGateRepairRestoresOnlyWhatWasLost(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 10, nil)
	gate := w.gate.(*memory.Gate)
	lost, kept := w.live(t, 3), w.live(t, 3)
	for _, vid := range []domain.VoucherID{lost, kept} {
		if _, err := w.claim.Handle(ctx, 1, vid); err != nil {
			t.Fatal(err)
		}
	}
	w.drain(t)
	if _, err := w.claim.Handle(ctx, 2, kept); err != nil { // queued, not in the database yet
		t.Fatal(err)
	}
	repair := application.NewRestoreGate(w.vouchers, w.orders, gate, gate, testenv.NewClock(now))
	if rep, err := repair.Repair(ctx); err != nil || rep.Restored != 0 || len(rep.Healed) != 0 {
		t.Fatalf("repair of a whole gate: %+v, %v; want nothing to do", rep, err)
	}
	gate.Forget(lost)
	if _, err := w.claim.Handle(ctx, 3, lost); !errors.Is(err, domain.ErrVoucherNotFound) {
		t.Fatalf("claim on the lost gate: %v", err)
	}
	if rep, err := repair.Repair(ctx); err != nil || rep.Restored != 1 {
		t.Fatalf("repair: %+v, %v; want 1", rep, err)
	}
	if _, err := w.claim.Handle(ctx, 1, lost); !errors.Is(err, domain.ErrAlreadyClaimed) {
		t.Fatalf("the database's buyer was not restored: %v", err)
	}
	if _, err := w.claim.Handle(ctx, 3, lost); err != nil {
		t.Fatalf("the repaired voucher is not claimable: %v", err)
	}
	if _, err := w.claim.Handle(ctx, 2, kept); !errors.Is(err, domain.ErrAlreadyClaimed) {
		t.Fatalf("repair touched the kept gate: %v", err)
	}
}
