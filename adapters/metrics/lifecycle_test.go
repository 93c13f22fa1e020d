package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/domain"
)

// The lifecycle's instruments, read after a known sequence on the memory
// lifecycle: three unpaid orders (pay window 1 min); one paid, then charged
// again under another transaction (a double charge), and the same
// notification repeated (not counted again); the other two expired 3 s after
// their deadline, one of them paid late; every expired unit returned.
func TestLifecycleCounters(t *testing.T) {
	ctx := context.Background()
	vouchers := memory.NewVouchers()
	t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	sale, _ := domain.NewSale(10, t0.Add(-time.Minute), t0.Add(time.Hour))
	v, _ := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "t", PayValue: 5}, sale)
	v, err := vouchers.AddSeckill(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	orders := memory.NewOrders(vouchers).WithPayWindow(time.Minute)
	m := metrics.New()
	life := m.OrderLifecycle(orders)
	var os []domain.VoucherOrder
	for u := 1; u <= 3; u++ {
		id, _ := domain.NewOrderID(t0, uint32(u))
		o, _ := domain.NewVoucherOrder(id, domain.UserID(u), v.ID())
		os = append(os, o)
	}
	if _, err := orders.CreateBatch(ctx, os); err != nil {
		t.Fatal(err)
	}
	pay := func(o domain.VoucherOrder, tx string) {
		t.Helper()
		if _, err := life.Pay(ctx, domain.Payment{TransactionID: tx, Order: o, Amount: 5, At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	pay(os[0], "a")
	pay(os[0], "a") // the same notification: not a payment
	pay(os[0], "b") // a double charge
	due, err := life.ExpireDue(ctx, t0.Add(time.Minute+3*time.Second), 10)
	if err != nil || len(due) != 2 {
		t.Fatalf("expired %v, %v; want 2", due, err)
	}
	pay(os[1], "c") // late
	ids := []domain.OrderID{due[0].Order.ID(), due[1].Order.ID()}
	if err := life.Returned(ctx, ids); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP seckill_orders_expired_total Unpaid orders this instance cancelled because their pay window passed.
# TYPE seckill_orders_expired_total counter
seckill_orders_expired_total 2
# HELP seckill_units_returned_total Units of cancelled orders (expired or by their buyer) this instance gave back to the gate.
# TYPE seckill_units_returned_total counter
seckill_units_returned_total 2
# HELP seckill_payments_total Payments received, once per provider transaction, by kind: settled, late (after the order was cancelled), double (another transaction for a paid order), unsold (for a failed order); all but settled are owed back.
# TYPE seckill_payments_total counter
seckill_payments_total{kind="double"} 1
seckill_payments_total{kind="late"} 1
seckill_payments_total{kind="settled"} 1
seckill_payments_total{kind="unsold"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), stringsReader(want),
		"seckill_orders_expired_total", "seckill_units_returned_total", "seckill_payments_total"); err != nil {
		t.Fatal(err)
	}
	mfs, _ := m.Registry().Gather()
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "seckill_order_expiry_lag_seconds" {
			found = true
			if h := mf.GetMetric()[0].GetHistogram(); h.GetSampleCount() != 2 || h.GetSampleSum() != 6 {
				t.Errorf("expiry lag: %d observations summing %vs, want 2 of 3s", h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
	if !found {
		t.Fatal("seckill_order_expiry_lag_seconds missing")
	}
}
