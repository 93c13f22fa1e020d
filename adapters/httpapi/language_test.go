package httpapi_test

import (
	"net/http"
	"testing"
)

// TestAnswersInTheClientsLanguage: Accept-Language: en gets English
// errorMsgs, over every path an answer takes (a refusal from the use case,
// the sold-out edge before the router, a 401, the router's 404, a busy
// 503); without it, or preferring Chinese, hmdp's Chinese. The code is the
// same in both.
func TestAnswersInTheClientsLanguage(t *testing.T) {
	e := newEnv(t, options{marks: true})
	open := e.addVoucher(1, 10)
	out := e.addVoucher(1, 1)
	e.sellOut(t, out)
	tok := e.token(42)
	e.claim(open, tok) // the next claim of user 42 is a duplicate
	en := map[string]string{"Accept-Language": "en-US,en;q=0.9"}
	zh := map[string]string{"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}
	for _, tc := range []struct {
		name   string
		r      req
		status int
		code   string
		zh, en string
	}{
		{"duplicate", req{method: "POST", path: "/voucher-order/seckill/" + open, token: tok}, http.StatusOK, "duplicate",
			"不能重复下单", "You already hold as many orders of this voucher as one user may"},
		{"sold_out_at_the_edge", req{method: "POST", path: "/voucher-order/seckill/" + out, token: tok}, http.StatusOK, "sold_out",
			"库存不足", "Sold out"},
		{"no_login", req{method: "POST", path: "/voucher-order/seckill/" + open, token: "unknown"}, http.StatusUnauthorized, "unauthorized",
			"未登录或登录已过期", "Not logged in, or the login has expired"},
		{"no_route", req{method: "GET", path: "/nowhere"}, http.StatusNotFound, "not_found",
			"接口不存在", "No such endpoint"},
		{"order_not_found", req{method: "GET", path: "/voucher-order/1234", token: tok}, http.StatusNotFound, "not_found",
			"订单不存在", "Order not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, lang := range []struct {
				header map[string]string
				want   string
			}{{nil, tc.zh}, {zh, tc.zh}, {en, tc.en}} {
				r := tc.r
				r.header = lang.header
				res := e.do(r)
				if res.status != tc.status || res.Code != tc.code || res.ErrorMsg != lang.want {
					t.Fatalf("Accept-Language %v: %d %s %q; want %d %s %q", lang.header, res.status, res.Code, res.ErrorMsg, tc.status, tc.code, lang.want)
				}
			}
		})
	}
}
