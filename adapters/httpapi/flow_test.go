package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/domain"
)

type voucherOut struct {
	ID          string `json:"id"`
	ShopID      int64  `json:"shopId"`
	Title       string `json:"title"`
	SubTitle    string `json:"subTitle"`
	Rules       string `json:"rules"`
	PayValue    int64  `json:"payValue"`
	ActualValue int64  `json:"actualValue"`
	Type        int    `json:"type"`
	Status      int    `json:"status"`
	Stock       *int   `json:"stock"`
	BeginTime   string `json:"beginTime"`
	EndTime     string `json:"endTime"`
}

type orderOut struct {
	ID        string  `json:"id"`
	VoucherID string  `json:"voucherId"`
	UserID    string  `json:"userId"`
	State     string  `json:"state"`
	Reason    *string `json:"reason"`
}

func (e *env) list(shop string) []voucherOut {
	e.t.Helper()
	res := e.mustOK(req{method: "GET", path: "/voucher/list/" + shop})
	var vs []voucherOut
	if err := json.Unmarshal(res.Data, &vs); err != nil {
		e.t.Fatalf("list data: %v: %s", err, res.raw)
	}
	return vs
}

func (e *env) order(id, token string) (result, orderOut) {
	e.t.Helper()
	res := e.do(req{method: "GET", path: "/voucher-order/" + id, token: token})
	var o orderOut
	if res.Success {
		if err := json.Unmarshal(res.Data, &o); err != nil {
			e.t.Fatalf("order data: %v: %s", err, res.raw)
		}
	}
	return res, o
}

func TestSeckillFlow(t *testing.T) {
	e := newEnv(t, options{})

	// Created with one time in the server's zone and one in RFC 3339 with
	// another offset; the list answers both in the server's zone.
	body := `{"shopId":7,"title":"100元代金券","subTitle":"周一至周五均可使用","rules":"全场通用",` +
		`"payValue":8000,"actualValue":10000,"type":1,"stock":2,` +
		`"beginTime":"2026-11-29T20:00:00","endTime":"2026-11-29T14:00:00Z"}`
	res := e.mustOK(req{method: "POST", path: "/voucher/seckill", token: e.adminToken(), body: body})
	voucher := res.dataString(t)
	if strings.Contains(res.raw, `"errorMsg"`) || strings.Contains(res.raw, `"code"`) || strings.Contains(res.raw, `"total"`) {
		t.Fatalf("empty fields are not omitted: %s", res.raw)
	}

	vs := e.list("7")
	if len(vs) != 1 {
		t.Fatalf("list: got %d vouchers, want 1", len(vs))
	}
	want := voucherOut{
		ID: voucher, ShopID: 7, Title: "100元代金券", SubTitle: "周一至周五均可使用", Rules: "全场通用",
		PayValue: 8000, ActualValue: 10000, Type: 1, Status: 1,
		BeginTime: "2026-11-29T20:00:00", EndTime: "2026-11-29T22:00:00",
	}
	got := vs[0]
	if got.Stock == nil || *got.Stock != 2 {
		t.Fatalf("list: stock = %v, want 2", got.Stock)
	}
	got.Stock = nil
	if got != want {
		t.Fatalf("list:\n got %+v\nwant %+v", got, want)
	}
	if other := e.list("8"); len(other) != 0 {
		t.Fatalf("another shop lists %d vouchers", len(other))
	}

	alice, bob, carol := e.token(1), e.token(2), e.token(3)

	res = e.claim(voucher, alice)
	if res.status != http.StatusOK || !res.Success {
		t.Fatalf("first claim: %d %s", res.status, res.raw)
	}
	aliceOrder := res.dataString(t)
	if n, err := strconv.ParseInt(aliceOrder, 10, 64); err != nil || n <= 0 {
		t.Fatalf("order id %q is not a positive integer string", aliceOrder)
	}

	wantRefusal(t, e.claim(voucher, alice), http.StatusOK, "duplicate", "不能重复下单")
	bobOrder := e.mustOK(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: bob}).dataString(t)
	wantRefusal(t, e.claim(voucher, carol), http.StatusOK, "sold_out", "库存不足")
	wantRefusal(t, e.claim("999999", carol), http.StatusOK, "not_found", "")
	if got := e.gateStock(voucher); got != 0 {
		t.Fatalf("gate stock = %d, want 0", got)
	}

	// Before the worker runs, the order is known to the gate only.
	res, o := e.order(aliceOrder, alice)
	if res.status != http.StatusOK {
		t.Fatalf("order status: %d %s", res.status, res.raw)
	}
	if (o != orderOut{ID: aliceOrder, VoucherID: voucher, UserID: "1", State: "queued"}) {
		t.Fatalf("queued order = %+v", o)
	}

	// Own orders only, and a stranger's order looks exactly like a missing one.
	res, _ = e.order(aliceOrder, bob)
	wantRefusal(t, res, http.StatusNotFound, "not_found", "")
	strangers := res.raw
	res, _ = e.order("123456789", alice)
	wantRefusal(t, res, http.StatusNotFound, "not_found", "")
	if res.raw != strangers {
		t.Fatalf("another user's order answers %s, a missing one %s", strangers, res.raw)
	}

	// The worker's step, then the same order is created.
	ds := e.drain(2)
	orders := make([]domain.VoucherOrder, len(ds))
	for i, d := range ds {
		orders[i] = d.Order
	}
	if _, err := e.fulfill.Handle(context.Background(), orders); err != nil {
		t.Fatalf("fulfil: %v", err)
	}
	_, o = e.order(aliceOrder, alice)
	if o.State != "created" || o.Reason != nil {
		t.Fatalf("after fulfilment: %+v", o)
	}
	_, o = e.order(bobOrder, bob)
	if o.State != "created" || o.UserID != "2" {
		t.Fatalf("bob's order after fulfilment: %+v", o)
	}
}

func TestUnauthorized(t *testing.T) {
	e := newEnv(t, options{})
	voucher := e.addVoucher(1, 5)
	before := e.calls.snapshot()

	cases := []struct {
		name string
		r    req
	}{
		{"claim_without_token", req{method: "POST", path: "/voucher-order/seckill/" + voucher}},
		{"claim_with_unknown_token", req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: "nope"}},
		{"order_without_token", req{method: "GET", path: "/voucher-order/1"}},
		{"order_with_unknown_token", req{method: "GET", path: "/voucher-order/1", token: "nope"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantRefusal(t, e.do(tc.r), http.StatusUnauthorized, "unauthorized", "")
		})
	}
	if after := e.calls.snapshot(); !equalCounts(before, after) {
		t.Fatalf("unauthorized requests reached the ports: %v -> %v", before, after)
	}
	if got := e.gateStock(voucher); got != 5 {
		t.Fatalf("gate stock = %d, want 5", got)
	}
}

func TestSaleWindow(t *testing.T) {
	cases := []struct {
		name       string
		begin, end time.Time
		code, msg  string
	}{
		{"not_started", now.Add(time.Minute), now.Add(time.Hour), "not_started", "秒杀尚未开始"},
		{"ended", now.Add(-time.Hour), now.Add(-time.Minute), "ended", "秒杀已经结束"},
		{"ends_exactly_now", now.Add(-time.Hour), now, "ended", "秒杀已经结束"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Created before its window opens (one that has already ended
			// is refused at creation), claimed at now.
			e := newEnv(t, options{createdAt: tc.begin.Add(-time.Minute)})
			voucher := e.addVoucherWindow(1, 3, tc.begin, tc.end)
			wantRefusal(t, e.claim(voucher, e.token(1)), http.StatusOK, tc.code, tc.msg)
			if got := e.gateStock(voucher); got != 3 {
				t.Fatalf("gate stock = %d, want 3", got)
			}
			e.drain(0)
		})
	}
}

// A full queue must not cost the user their place: the reservation is rolled
// back, so the same user can claim again once there is room, and the unit is
// back in stock for them.
func TestBusyRollsBackReservation(t *testing.T) {
	e := newEnv(t, options{queueCap: 1})
	voucher := e.addVoucher(1, 2)
	alice, bob, carol := e.token(1), e.token(2), e.token(3)

	e.mustOK(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: alice})
	res := e.claim(voucher, bob)
	wantRefusal(t, res, http.StatusServiceUnavailable, "busy", "")
	if got := e.gateStock(voucher); got != 1 {
		t.Fatalf("gate stock after busy = %d, want 1 (the unit returned)", got)
	}
	if !strings.Contains(e.logs.String(), `"level":"warn"`) {
		t.Fatalf("a 503 is not logged at warn: %s", e.logs.String())
	}

	e.drain(1)
	e.mustOK(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: bob})
	wantRefusal(t, e.claim(voucher, carol), http.StatusOK, "sold_out", "库存不足")
}

// The flow over a real HTTP server: what the recorder-based tests cannot
// show (header handling by net/http, a chunked body hitting the limit).
func TestOverRealServer(t *testing.T) {
	e := newEnv(t, options{maxBody: 512})
	srv := httptest.NewServer(contractHandler(t, e.h))
	defer srv.Close()

	send := func(method, path, token string, body io.Reader) result {
		t.Helper()
		r, err := http.NewRequest(method, srv.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if body != nil {
			r.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			r.Header.Set("authorization", token)
		}
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return decodeResult(t, resp.StatusCode, resp.Header.Get("Content-Type"), string(raw))
	}

	res := send("POST", "/voucher/seckill", e.adminToken(), strings.NewReader(voucherJSON(3, 1, now.Add(-time.Hour), now.Add(time.Hour))))
	voucher := res.dataString(t)
	token := send("POST", "/dev/tokens", "", strings.NewReader(`{"userId":9}`)).dataString(t)
	if res := send("POST", "/voucher-order/seckill/"+voucher, token, nil); !res.Success {
		t.Fatalf("claim over HTTP: %d %s", res.status, res.raw)
	}

	// io.MultiReader hides the length, so the client sends it chunked and only
	// the reading limit can stop it.
	big := io.MultiReader(strings.NewReader(`{"shopId":3,"title":"`), strings.NewReader(strings.Repeat("x", 4096)+`"}`))
	res = send("POST", "/voucher/seckill", e.adminToken(), big)
	wantRefusal(t, res, http.StatusRequestEntityTooLarge, "bad_request", "request body is larger than 512 bytes")
	if vs := e.list("3"); len(vs) != 1 {
		t.Fatalf("shop 3 has %d vouchers, want 1", len(vs))
	}
}

// BenchmarkClaimRefused measures the adapter's share of the hot path (router,
// middleware, auth, answer) with logging at info, as in production: the
// duplicate refusal leaves the fakes' state unchanged, so every iteration does
// the same work.
func BenchmarkClaimRefused(b *testing.B) {
	b.Run("no_limits", func(b *testing.B) { benchClaimRefused(b, httpapi.Limits{}, nil) })
	// Limits far above the loop's rate: what checking them costs an allowed request.
	b.Run("limits", func(b *testing.B) {
		benchClaimRefused(b, httpapi.Limits{PerUser: 1 << 30, PerIP: 1 << 30, Window: time.Hour}, nil)
	})
	// Behind a trusted proxy, as a deployment behind nginx: the client's
	// address comes from X-Forwarded-For.
	b.Run("limits_proxied", func(b *testing.B) {
		benchClaimRefused(b, httpapi.Limits{PerUser: 1 << 30, PerIP: 1 << 30, Window: time.Hour},
			[]netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")})
	})
}

func benchClaimRefused(b *testing.B, limits httpapi.Limits, proxies []netip.Prefix) {
	e := newEnv(b, options{quiet: true, limits: limits, proxies: proxies})
	voucher := e.addVoucher(1, 10)
	token := e.token(1)
	if res := e.claim(voucher, token); !res.Success {
		b.Fatalf("first claim: %s", res.raw)
	}
	r := httptest.NewRequest("POST", "/voucher-order/seckill/"+voucher, nil)
	r.Header.Set("authorization", token)
	r.Header.Set("X-Forwarded-For", "203.0.113.7")
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
}
