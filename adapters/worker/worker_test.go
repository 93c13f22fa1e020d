package worker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/worker"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// flakyOrders fails the first failures calls of CreateBatch, as a database
// outage would.
type flakyOrders struct {
	ports.OrderRepository
	mu       sync.Mutex
	failures int
	calls    int
}

func (f *flakyOrders) CreateBatch(ctx context.Context, os []domain.VoucherOrder) ([]ports.Outcome, error) {
	f.mu.Lock()
	f.calls++
	fail := f.calls <= f.failures
	f.mu.Unlock()
	if fail {
		return nil, errors.New("connection refused")
	}
	return f.OrderRepository.CreateBatch(ctx, os)
}

type rig struct {
	orders   *memory.Orders
	vouchers *memory.Vouchers
	gate     *memory.Gate
	voucher  domain.VoucherID
}

func newRig(t *testing.T, stock int) *rig {
	t.Helper()
	r := &rig{vouchers: memory.NewVouchers(), gate: memory.NewGate(testenv.WallClock{})}
	r.orders = memory.NewOrders(r.vouchers)
	sale, _ := domain.NewSale(stock, testenv.WallClock{}.Now().Add(-time.Hour), testenv.WallClock{}.Now().Add(time.Hour))
	v, _ := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "w"}, sale)
	v, err := r.vouchers.AddSeckill(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.gate.Preheat(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	r.voucher = v.ID()
	return r
}

func (r *rig) order(t *testing.T, i int) domain.VoucherOrder {
	o, err := domain.NewVoucherOrder(domain.OrderID(1000+i), domain.UserID(i), r.voucher)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestWorkerRetriesThroughAnOutageAndDrainsOnClose(t *testing.T) {
	r := newRig(t, 50)
	repo := &flakyOrders{OrderRepository: r.orders, failures: 3}
	q := chanqueue.New(100, time.Millisecond)
	w := worker.New(q, application.NewFulfillOrders(repo, r.gate), zerolog.Nop(),
		worker.Options{BatchSize: 7, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond})
	for i := 1; i <= 50; i++ {
		if err := q.Publish(context.Background(), r.order(t, i)); err != nil {
			t.Fatal(err)
		}
	}
	_ = q.Close()
	if err := w.Run(context.Background()); err != nil {
		t.Fatalf("a closed queue must end Run cleanly once drained: %v", err)
	}
	for i := 1; i <= 50; i++ {
		st, err := r.orders.Find(context.Background(), r.order(t, i).ID())
		if err != nil || st.State != domain.OrderCreated {
			t.Fatalf("order %d: %+v, %v; every order must survive the outage", i, st, err)
		}
	}
	if repo.calls <= 3 {
		t.Fatalf("%d CreateBatch calls: the failed ones were not retried", repo.calls)
	}
}

func TestWorkerHardStopDuringAnEndlessOutage(t *testing.T) {
	r := newRig(t, 5)
	repo := &flakyOrders{OrderRepository: r.orders, failures: 1 << 30}
	q := chanqueue.New(10, 0)
	w := worker.New(q, application.NewFulfillOrders(repo, r.gate), zerolog.Nop(),
		worker.Options{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if err := q.Publish(context.Background(), r.order(t, 1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// Wait until the batch has been tried a few times, then stop hard.
	testenv.Eventually(t, 10*time.Second, func() (bool, string) {
		repo.mu.Lock()
		defer repo.mu.Unlock()
		return repo.calls >= 3, fmt.Sprintf("%d attempts", repo.calls)
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if _, err := r.orders.Find(context.Background(), r.order(t, 1).ID()); !errors.Is(err, domain.ErrOrderNotFound) {
		t.Fatalf("nothing may be recorded during the outage: %v", err)
	}
}

// redeliveringQueue hands out one batch with the given attempt counts and
// records what was acked and dead-lettered.
type redeliveringQueue struct {
	ds         []ports.Delivery
	served     bool
	acked      []ports.Delivery
	deadLetter []ports.Delivery
	reason     domain.FailureReason
	byRef      map[string]domain.FailureReason // every dead letter's reason
}

func (q *redeliveringQueue) Publish(context.Context, domain.VoucherOrder) error { return nil }
func (q *redeliveringQueue) Receive(ctx context.Context, max int) ([]ports.Delivery, error) {
	if q.served {
		return nil, ports.ErrQueueClosed
	}
	q.served = true
	return q.ds, nil
}
func (q *redeliveringQueue) Ack(_ context.Context, ds []ports.Delivery) error {
	q.acked = append(q.acked, ds...)
	return nil
}
func (q *redeliveringQueue) DeadLetter(_ context.Context, ds []ports.Delivery, r domain.FailureReason) error {
	q.deadLetter, q.reason = append(q.deadLetter, ds...), r
	if q.byRef == nil {
		q.byRef = map[string]domain.FailureReason{}
	}
	for _, d := range ds {
		q.byRef[d.Ref] = r
	}
	return nil
}
func (q *redeliveringQueue) Close() error { return nil }

func TestWorkerDeadLettersOrdersDeliveredTooOften(t *testing.T) {
	r := newRig(t, 5)
	ctx := context.Background()
	ok, spent := r.order(t, 1), r.order(t, 2)
	for _, o := range []domain.VoucherOrder{ok, spent} {
		if err := r.gate.Reserve(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	q := &redeliveringQueue{ds: []ports.Delivery{{Order: ok, Ref: "1-0", Attempts: 3}, {Order: spent, Ref: "2-0", Attempts: 4}}}
	w := worker.New(q, application.NewFulfillOrders(r.orders, r.gate), zerolog.Nop(), worker.Options{MaxDeliveries: 3})
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(q.acked) != fmt.Sprint(q.ds[:1]) || fmt.Sprint(q.deadLetter) != fmt.Sprint(q.ds[1:]) ||
		q.reason != domain.FailUndeliverable {
		t.Fatalf("acked %v, dead-lettered %v (%s)", q.acked, q.deadLetter, q.reason)
	}
	if st, _ := r.orders.Find(ctx, ok.ID()); st.State != domain.OrderCreated {
		t.Fatalf("order within the limit: %+v", st)
	}
	if st, _ := r.orders.Find(ctx, spent.ID()); st.State != domain.OrderFailed || st.Reason != domain.FailUndeliverable {
		t.Fatalf("order past the limit: %+v", st)
	}
	// Its user was let go and its unit returned: the user may claim again.
	again, _ := domain.NewVoucherOrder(9999, spent.UserID(), r.voucher)
	if err := r.gate.Reserve(ctx, again); err != nil {
		t.Fatalf("user of the dead-lettered order: %v", err)
	}
}

func TestWorkerDeadLettersOrdersTheDatabaseRefused(t *testing.T) {
	r := newRig(t, 1) // one unit: the second order is refused for good
	ctx := context.Background()
	sold, refused := r.order(t, 1), r.order(t, 2)
	q := &redeliveringQueue{ds: []ports.Delivery{{Order: sold, Ref: "1-0", Attempts: 1}, {Order: refused, Ref: "2-0", Attempts: 1}}}
	w := worker.New(q, application.NewFulfillOrders(r.orders, r.gate), zerolog.Nop(), worker.Options{MaxDeliveries: 3})
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(q.acked) != fmt.Sprint(q.ds[:1]) || fmt.Sprint(q.deadLetter) != fmt.Sprint(q.ds[1:]) ||
		q.reason != domain.FailOutOfStock {
		t.Fatalf("acked %v, dead-lettered %v (%s); want the refused order dead-lettered as out_of_stock", q.acked, q.deadLetter, q.reason)
	}
	if st, _ := r.orders.Find(ctx, refused.ID()); st.State != domain.OrderFailed || st.Reason != domain.FailOutOfStock {
		t.Fatalf("refused order: %+v", st)
	}
}

// refusingOrders refuses for good (ports.ErrPermanent) every batch that holds
// the bad order, as MySQL does a row with a value out of range: the whole
// transaction is rolled back, whoever else is in it.
type refusingOrders struct {
	ports.OrderRepository
	bad   domain.OrderID
	calls int
}

func (f *refusingOrders) CreateBatch(ctx context.Context, os []domain.VoucherOrder) ([]ports.Outcome, error) {
	f.calls++
	for _, o := range os {
		if o.ID() == f.bad {
			return nil, fmt.Errorf("create batch of %d orders: %w: Error 1264: Out of range value", len(os), ports.ErrPermanent)
		}
	}
	return f.OrderRepository.CreateBatch(ctx, os)
}

// One permanently refused order among ten used to hold the other nine
// forever (31 attempts in 3 s, none created, nothing dead-lettered). It is
// now isolated by bisection, recorded failed as refused with the database's
// words in the log, dead-lettered, and the nine land.
func TestWorkerIsolatesAnOrderTheDatabaseRefusesForGood(t *testing.T) {
	r := newRig(t, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ds []ports.Delivery
	for i := 1; i <= 10; i++ {
		o := r.order(t, i)
		if err := r.gate.Reserve(ctx, o); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, ports.Delivery{Order: o, Ref: fmt.Sprintf("%d-0", i), Attempts: 1})
	}
	bad := r.order(t, 7)
	repo := &refusingOrders{OrderRepository: r.orders, bad: bad.ID()}
	q := &redeliveringQueue{ds: ds}
	var logs bytes.Buffer
	w := worker.New(q, application.NewFulfillOrders(repo, r.gate), zerolog.New(&logs),
		worker.Options{BatchSize: 10, MaxDeliveries: 3, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if err := w.Run(ctx); err != nil {
		t.Fatalf("Run = %v; the batch never settled (%d CreateBatch calls)", err, repo.calls)
	}
	for i := 1; i <= 10; i++ {
		st, err := r.orders.Find(context.Background(), r.order(t, i).ID())
		if i == 7 {
			if err != nil || st.State != domain.OrderFailed || st.Reason != domain.FailRefused {
				t.Fatalf("the refused order: %+v, %v; want failed (refused)", st, err)
			}
			continue
		}
		if err != nil || st.State != domain.OrderCreated {
			t.Fatalf("good order %d: %+v, %v; want created", i, st, err)
		}
	}
	if len(q.deadLetter) != 1 || q.deadLetter[0].Order != bad || q.reason != domain.FailRefused {
		t.Fatalf("dead-lettered %v (%s), want only the refused order as refused", q.deadLetter, q.reason)
	}
	if len(q.acked) != 9 {
		t.Fatalf("%d acked, want the 9 good orders", len(q.acked))
	}
	// Bisection: about 2*log2(10) transactions, not one per order and not endless.
	if repo.calls > 9 {
		t.Fatalf("%d CreateBatch calls to isolate one order among 10", repo.calls)
	}
	if !strings.Contains(logs.String(), "Out of range value") {
		t.Fatalf("the log does not carry the database's reason:\n%s", logs.String())
	}
	// The refused order's unit went back and its user was let go.
	if err := r.gate.Reserve(context.Background(), testenv.Order(t, 9999, bad.UserID(), r.voucher)); err != nil {
		t.Fatalf("user of the refused order cannot claim again: %v", err)
	}
}

// An order past the delivery limit that an earlier delivery had in fact
// created (its ack was lost) used to be dead-lettered and logged as failed.
// MarkFailed keeps the created outcome (New=false): the order is acked, and
// one failed earlier for another reason is dead-lettered under that reason.
func TestWorkerOverTheLimitSaysWhatReallyHappened(t *testing.T) {
	r := newRig(t, 1)
	ctx := context.Background()
	created, soldOut, fresh := r.order(t, 1), r.order(t, 2), r.order(t, 3)
	if _, err := r.orders.CreateBatch(ctx, []domain.VoucherOrder{created, soldOut}); err != nil { // stock 1: the second fails out_of_stock
		t.Fatal(err)
	}
	q := &redeliveringQueue{ds: []ports.Delivery{
		{Order: created, Ref: "1-0", Attempts: 5}, {Order: soldOut, Ref: "2-0", Attempts: 5}, {Order: fresh, Ref: "3-0", Attempts: 5},
	}}
	var logs bytes.Buffer
	w := worker.New(q, application.NewFulfillOrders(r.orders, r.gate), zerolog.New(&logs), worker.Options{MaxDeliveries: 3})
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.orders.Find(ctx, created.ID()); st.State != domain.OrderCreated {
		t.Fatalf("the created order: %+v", st)
	}
	if fmt.Sprint(q.acked) != fmt.Sprint(q.ds[:1]) {
		t.Fatalf("acked %v, want only the created order", q.acked)
	}
	if q.byRef["1-0"] != "" || q.byRef["2-0"] != domain.FailOutOfStock || q.byRef["3-0"] != domain.FailUndeliverable {
		t.Fatalf("dead letters by ref %v; want none for the created order, out_of_stock and undeliverable for the others", q.byRef)
	}
	var createdLine string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, fmt.Sprintf(`"order":%d,`, created.ID())) && strings.Contains(line, "too often") {
			createdLine = line
		}
	}
	if !strings.Contains(createdLine, `"outcome":"created"`) || strings.Contains(createdLine, "recorded as failed") {
		t.Fatalf("the created order's log line does not say it was created: %q\nall logs:\n%s", createdLine, logs.String())
	}
}
