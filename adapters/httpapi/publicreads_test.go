package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/application"
)

// TestPublicReadFloodCostsFewBackendCalls: the unauthenticated reads that
// cost a backend round trip (a shop's list is a MySQL query, readiness a
// Redis and a database ping) answer a flood of 300 simultaneous requests
// with one backend call per key per PublicReadTTL, not one per request. The
// bound counts the TTL windows the flood spanned, so a slow machine cannot
// fail it.
func TestPublicReadFloodCostsFewBackendCalls(t *testing.T) {
	const flood = 300
	var pings atomic.Int64
	for _, tc := range []struct {
		name  string
		path  string
		calls func(e *env) int64
	}{
		{name: "voucher_list", path: "/voucher/list/5", calls: func(e *env) int64 { return int64(e.calls.snapshot()["vouchers.ListByShop"]) }},
		{name: "readiness", path: "/readyz", calls: func(*env) int64 { return pings.Load() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pings.Store(0)
			e := newEnv(t, options{quiet: true, ready: func(context.Context) error { pings.Add(1); return nil }})
			e.addVoucher(5, 3)
			before := tc.calls(e)
			start := make(chan struct{})
			var wg sync.WaitGroup
			var bad atomic.Int64
			for range flood {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					rec := httptest.NewRecorder()
					e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
					if rec.Code != http.StatusOK {
						bad.Add(1)
					}
				}()
			}
			t0 := time.Now()
			close(start)
			wg.Wait()
			elapsed := time.Since(t0)
			if bad.Load() > 0 {
				t.Fatalf("%d of %d requests were not answered 200", bad.Load(), flood)
			}
			calls := tc.calls(e) - before
			limit := 1 + int64(elapsed/httpapi.DefaultPublicReadTTL) + 1
			t.Logf("%d requests in %s cost %d backend calls (limit %d)", flood, elapsed, calls, limit)
			if calls > limit {
				t.Fatalf("%d requests cost %d backend calls, want at most %d", flood, calls, limit)
			}
		})
	}
}

// TestVoucherListIsCappedAndFresh: a shop lists at most
// application.MaxShopVouchers vouchers (the newest, in id order), and a
// voucher created through this instance is listed at once, cache or not.
func TestVoucherListIsCappedAndFresh(t *testing.T) {
	e := newEnv(t, options{quiet: true})
	if vs := e.list("6"); len(vs) != 0 {
		t.Fatalf("shop 6 lists %d vouchers before any exists", len(vs))
	}
	first := e.addVoucher(6, 1)
	if vs := e.list("6"); len(vs) != 1 {
		t.Fatalf("a voucher created a moment after the list was read is not listed: %d vouchers", len(vs))
	}
	var last string
	for range application.MaxShopVouchers + 4 {
		last = e.addVoucher(6, 1)
	}
	vs := e.list("6")
	if len(vs) != application.MaxShopVouchers {
		t.Fatalf("shop 6 lists %d vouchers, want the cap %d", len(vs), application.MaxShopVouchers)
	}
	ids := make([]int64, len(vs))
	for i, v := range vs {
		ids[i], _ = strconv.ParseInt(v.ID, 10, 64)
		if i > 0 && ids[i] <= ids[i-1] {
			t.Fatalf("list not in id order at %d: %v", i, ids[i-1:i+1])
		}
	}
	if strconv.FormatInt(ids[len(ids)-1], 10) != last || strconv.FormatInt(ids[0], 10) == first {
		t.Fatalf("capped list runs %d..%d: want the newest, ending at %s", ids[0], ids[len(ids)-1], last)
	}
}
