package worker_test

import (
	"context"
	"errors"
	"fmt"
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

type clock struct{}

func (clock) Now() time.Time { return time.Now() }

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
	r := &rig{vouchers: memory.NewVouchers(), gate: memory.NewGate(clock{})}
	r.orders = memory.NewOrders(r.vouchers)
	sale, _ := domain.NewSale(stock, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
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
