package httpapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode"
)

func inChinese(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}

// TestErrorMessagesFollowTheirReader: errorMsg is in Chinese where the
// original front end shows it to a person, in English where a developer's
// or a machine's client reads it (envelope.go says which is which); no kind
// of answer speaks both.
func TestErrorMessagesFollowTheirReader(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(e *env) req
		status  int
		chinese bool
	}{
		{"no_token", func(e *env) req { return req{method: "POST", path: "/voucher-order/seckill/1"} }, 401, true},
		{"not_an_admin", func(e *env) req {
			return req{method: "POST", path: "/voucher/seckill", token: e.token(42), body: validVoucher(nil)}
		}, 403, true},
		{"unknown_order", func(e *env) req { return req{method: "GET", path: "/voucher-order/123", token: e.token(42)} }, 404, true},
		{"unknown_route", func(e *env) req { return req{method: "GET", path: "/no/such/route"} }, 404, true},
		{"wrong_method", func(e *env) req { return req{method: "DELETE", path: "/voucher/list/1"} }, 405, true},
		{"internal", func(e *env) req {
			e.vouchers.listErr = errors.New("boom")
			return req{method: "GET", path: "/voucher/list/1"}
		}, 500, true},
		{"sold_out", func(e *env) req {
			id := e.addVoucher(1, 1)
			e.claim(id, e.token(1))
			return req{method: "POST", path: "/voucher-order/seckill/" + id, token: e.token(2)}
		}, 200, true},
		{"bad_input", func(e *env) req {
			return req{method: "POST", path: "/voucher/seckill", token: e.adminToken(), body: `{"shopId":1}`}
		}, 400, false},
		{"wrong_content_type", func(e *env) req {
			return req{method: "POST", path: "/voucher/seckill", token: e.adminToken(), body: validVoucher(nil),
				header: map[string]string{"Content-Type": "text/plain"}}
		}, 415, false},
		{"bad_payment_signature", func(e *env) req {
			return req{method: "POST", path: "/payments/notify", body: payBody("1", 8000),
				header: map[string]string{"X-Seckill-Signature": strings.Repeat("0", 64)}}
		}, 401, false},
		{"not_ready", func(e *env) req { return req{method: "GET", path: "/readyz"} }, 503, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opt := options{}
			if tc.name == "not_ready" {
				opt.ready = func(context.Context) error { return errors.New("mysql down") }
			}
			e := newEnv(t, opt)
			res := e.do(tc.setup(e))
			if res.status != tc.status || res.ErrorMsg == "" {
				t.Fatalf("got %d %s, want %d with an errorMsg", res.status, res.raw, tc.status)
			}
			if got := inChinese(res.ErrorMsg); got != tc.chinese {
				t.Fatalf("errorMsg %q: in Chinese %v, want %v", res.ErrorMsg, got, tc.chinese)
			}
		})
	}
}
