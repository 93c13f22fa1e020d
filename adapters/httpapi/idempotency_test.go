package httpapi_test

import (
	"net/http"
	"testing"
)

func TestAddVoucherIdempotencyKey(t *testing.T) {
	e := newEnv(t, options{})
	body := `{"shopId":8,"title":"t","payValue":1,"actualValue":2,"type":1,"stock":2,` +
		`"beginTime":"2026-11-29T19:00:00","endTime":"2026-11-29T21:00:00"}`
	key := map[string]string{"Idempotency-Key": "admin-7f3a"}
	first := e.mustOK(req{method: "POST", path: "/voucher/seckill", token: e.adminToken(), body: body, header: key}).dataString(t)
	again := e.mustOK(req{method: "POST", path: "/voucher/seckill", token: e.adminToken(), body: body, header: key}).dataString(t)
	if again != first {
		t.Fatalf("a retry with the same key created voucher %s, the first was %s", again, first)
	}
	if vs := e.list("8"); len(vs) != 1 {
		t.Fatalf("shop 8 lists %d vouchers, want 1", len(vs))
	}
	other := `{"shopId":8,"title":"t","payValue":1,"actualValue":2,"type":1,"stock":5,` +
		`"beginTime":"2026-11-29T19:00:00","endTime":"2026-11-29T21:00:00"}`
	res := e.do(req{method: "POST", path: "/voucher/seckill", token: e.adminToken(), body: other, header: key})
	if res.status != http.StatusBadRequest || res.Success || res.ErrorMsg == "" {
		t.Fatalf("key reused for another voucher: %d %s", res.status, res.raw)
	}
	if vs := e.list("8"); len(vs) != 1 {
		t.Fatalf("shop 8 lists %d vouchers after a refused reuse, want 1", len(vs))
	}
	// Without a key every request creates, as the original API does.
	e.mustOK(req{method: "POST", path: "/voucher/seckill", token: e.adminToken(), body: body})
	if vs := e.list("8"); len(vs) != 2 {
		t.Fatalf("shop 8 lists %d vouchers, want 2", len(vs))
	}
}
