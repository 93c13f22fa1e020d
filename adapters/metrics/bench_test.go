package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// cpuTime is the process's user and system CPU time so far (garbage
// collection included, which is most of what metrics add).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// BenchmarkClaim measures what metrics add to a claim through the router
// (the edge observer: one context, a map lookup, a counter and two histogram
// observations), on the memory fakes, where the claim itself is cheapest and
// the share of metrics therefore largest; against Redis it is smaller still.
// Compare bare and metrics of each case:
//
//	go test -run '^$' -bench BenchmarkClaim -count 6 ./adapters/metrics/ | benchstat -col /metrics -
func BenchmarkClaim(b *testing.B) {
	for _, c := range []struct {
		name  string
		setup func(b *testing.B, claim func(domain.UserID) int)
	}{
		// duplicate: the gate's full check, every time.
		{"duplicate", func(b *testing.B, claim func(domain.UserID) int) {
			if code := claim(1); code != http.StatusOK {
				b.Fatalf("first claim: %d", code)
			}
		}},
		// sold_out: the stampede's usual answer, from the sold-out mark.
		{"sold_out", func(b *testing.B, claim func(domain.UserID) int) {
			claim(1)
			claim(3)
			if code := claim(2); code != http.StatusOK {
				b.Fatalf("sold-out claim: %d", code)
			}
		}},
	} {
		for _, backend := range []string{"memory", "redis"} {
			for _, withMetrics := range []bool{false, true} {
				name := c.name + "/" + backend + "/metrics=" + strconv.FormatBool(withMetrics)
				b.Run(name, func(b *testing.B) {
					h, voucher, token := benchRouter(b, backend, withMetrics)
					claim := func(u domain.UserID) int {
						w := httptest.NewRecorder()
						r := httptest.NewRequest("POST", "/voucher-order/seckill/"+voucher, nil)
						r.Header.Set("authorization", token(u))
						h.ServeHTTP(w, r)
						return w.Code
					}
					c.setup(b, claim)
					r := httptest.NewRequest("POST", "/voucher-order/seckill/"+voucher, nil)
					r.Header.Set("authorization", token(2))
					if c.name == "duplicate" {
						r.Header.Set("authorization", token(1))
					}
					b.ReportAllocs()
					cpu0 := cpuTime()
					for b.Loop() {
						w := httptest.NewRecorder()
						h.ServeHTTP(w, r)
						if w.Code != http.StatusOK {
							b.Fatalf("status %d", w.Code)
						}
					}
					// CPU time rather than wall time: on a shared machine the
					// process waits for a core, and ns/op counts that wait.
					b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}

// benchRouter is the production claim stack (sold-out marks in front of the
// channel admission) over the memory fakes, with a voucher of stock 2; with
// backend "redis" the gate is the real one on SECKILL_TEST_REDIS_URL (the
// case is skipped without it), and metrics count its round trips.
func benchRouter(b *testing.B, backend string, withMetrics bool) (http.Handler, string, func(domain.UserID) string) {
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	clock := fixedClock{now}
	vouchers := memory.NewVouchers()
	orders := memory.NewOrders(vouchers)
	marks := application.NewSoldOutMarks(application.MaxSoldOutWindow, clock)
	counter := metrics.NewClaimCounter()
	m := metrics.New()
	var inner ports.StockGate = memory.NewGate(clock)
	if backend == "redis" {
		rdb := testenv.RealRedis(b)
		if withMetrics {
			m.InstrumentRedis(rdb)
		}
		inner = redisgate.New(rdb, redisgate.Options{Prefix: testenv.KeyPrefix(b)})
	}
	gate := marks.Gate(inner)
	queue := chanqueue.New(1<<10, 0)
	b.Cleanup(func() { _ = queue.Close() })
	sessions := memory.NewSessions()
	d := httpapi.Deps{
		AddVoucher:   application.NewAddSeckillVoucher(vouchers, orders, gate),
		ListVouchers: application.NewListShopVouchers(vouchers),
		Claim: application.NewClaimSeckill(memory.NewIDs(clock), chanqueue.NewAdmission(gate, queue)).
			WithSoldOutMarks(marks).WithRecorder(counter),
		GetOrder: application.NewGetOrder(orders, gate),
		Sessions: sessions,
		Ready:    func(context.Context) error { return nil },
		Log:      zerolog.Nop(),
	}
	if withMetrics {
		m.SoldOutAnswers(counter.Saved)
		d.ClaimObserver = m
	}
	sale, err := domain.NewSale(2, now.Add(-time.Minute), now.Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "bench"}, sale)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := application.NewAddSeckillVoucher(vouchers, orders, gate).HandleOnce(ctx, 1, "", v); err != nil {
		b.Fatal(err)
	}
	tokens := map[domain.UserID]string{}
	token := func(u domain.UserID) string {
		if t, ok := tokens[u]; ok {
			return t
		}
		t, err := sessions.Mint(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		tokens[u] = t
		return t
	}
	return httpapi.NewRouter(d), "1", token
}
