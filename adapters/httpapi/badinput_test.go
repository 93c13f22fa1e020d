package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// validVoucher is a creation body that succeeds; each case below breaks one
// thing in it.
func validVoucher(over map[string]string) string {
	fields := []struct{ k, v string }{
		{"shopId", "1"}, {"title", `"t"`}, {"subTitle", `"s"`}, {"rules", `"r"`},
		{"payValue", "8000"}, {"actualValue", "10000"}, {"type", "1"}, {"stock", "10"},
		{"beginTime", `"2026-11-29T20:00:00"`}, {"endTime", `"2026-11-29T22:00:00"`},
		{"buckets", "-"}, // absent unless a case sets it
	}
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		v, ok := over[f.k]
		if !ok {
			v = f.v
		}
		if v == "-" { // drop the field
			continue
		}
		parts = append(parts, fmt.Sprintf("%q:%s", f.k, v))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func TestBadInputChangesNothing(t *testing.T) {
	e := newEnv(t, options{maxBody: 1024})
	voucher := e.addVoucher(1, 5)
	token := e.token(1)
	// The valid body itself passes, so every refusal below is down to the one
	// thing each case breaks.
	if e.addVoucher(2, 1) == "" {
		t.Fatal("baseline voucher not created")
	}

	admin := e.adminToken()
	post := func(body string) req { return req{method: "POST", path: "/voucher/seckill", token: admin, body: body} }
	claim := func(id string) req { return req{method: "POST", path: "/voucher-order/seckill/" + id, token: token} }
	order := func(id string) req { return req{method: "GET", path: "/voucher-order/" + id, token: token} }
	list := func(id string) req { return req{method: "GET", path: "/voucher/list/" + id} }
	mint := func(body string) req { return req{method: "POST", path: "/dev/tokens", body: body} }

	cases := []struct {
		name   string
		r      req
		status int
		msg    string // errorMsg must contain it
	}{
		// JSON shape
		{"malformed_json", post(`{"shopId":1 "title":"t"}`), 400, "malformed JSON"},
		{"truncated_json", post(`{"shopId":1,`), 400, "truncated"},
		{"empty_body", req{method: "POST", path: "/voucher/seckill", token: admin, header: map[string]string{"Content-Type": "application/json"}}, 400, "empty"},
		{"array_instead_of_object", post(`[1,2]`), 400, "JSON object"},
		{"unknown_field", post(`{"status":1,` + validVoucher(nil)[1:]), 400, `unknown field "status"`},
		{"trailing_object", post(validVoucher(nil) + `{}`), 400, "exactly one JSON value"},
		{"trailing_garbage", post(validVoucher(nil) + ` x`), 400, "exactly one JSON value"},
		{"wrong_content_type", req{method: "POST", path: "/voucher/seckill", token: admin, body: validVoucher(nil), header: map[string]string{"Content-Type": "text/plain"}}, 415, "application/json"},
		{"form_content_type", req{method: "POST", path: "/voucher/seckill", token: admin, body: validVoucher(nil), header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415, "application/json"},
		{"duplicate_key", post(`{"stock":5,` + validVoucher(nil)[1:]), 400, `duplicate field "stock"`},
		{"duplicate_key_same_value", post(validVoucher(nil)[:len(validVoucher(nil))-1] + `,"title":"t"}`), 400, `duplicate field "title"`},
		{"case_variant_key", post(`{"stock":5,"STOCK":1,` + validVoucher(map[string]string{"stock": "-"})[1:]), 400, `unknown field "STOCK" (field names are case-sensitive: did you mean "stock"?)`},
		{"case_variant_key_alone", post(`{"Stock":1,` + validVoucher(map[string]string{"stock": "-"})[1:]), 400, `did you mean "stock"?`},
		{"kelvin_sign_key", post(`{"\u212aey":1}`), 400, `unknown field`},
		{"token_duplicate_key", mint(`{"userId":1,"userId":2}`), 400, `duplicate field "userId"`},
		{"token_case_variant_key", mint(`{"userid":42}`), 400, `did you mean "userId"?`},
		{"oversized_declared_length", post(validVoucher(map[string]string{"rules": `"` + strings.Repeat("r", 2000) + `"`})), 413, "larger than 1024 bytes"},
		{"oversized_chunked", req{method: "POST", path: "/voucher/seckill", token: admin, reader: io.MultiReader(strings.NewReader(validVoucher(map[string]string{"rules": `"` + strings.Repeat("r", 2000) + `"`})))}, 413, "larger than 1024 bytes"},

		// voucher fields
		{"nul_title", post(validVoucher(map[string]string{"title": `"\u0000"`})), 400, "title: must not hold control characters"},
		{"nul_inside_sub_title", post(validVoucher(map[string]string{"subTitle": `"a\u0000b"`})), 400, "subTitle: must not hold control characters"},
		{"escape_in_rules", post(validVoucher(map[string]string{"rules": `"\u001b[2J"`})), 400, "rules: must not hold control characters"},
		{"del_in_title", post(validVoucher(map[string]string{"title": `"x\u007f"`})), 400, "title: must not hold control characters"},
		{"stock_zero", post(validVoucher(map[string]string{"stock": "0"})), 400, "stock"},
		{"stock_negative", post(validVoucher(map[string]string{"stock": "-3"})), 400, "stock"},
		{"stock_missing", post(validVoucher(map[string]string{"stock": "-"})), 400, "stock: is required"},
		{"stock_fractional", post(validVoucher(map[string]string{"stock": "1.5"})), 400, "stock must be an integer"},
		{"stock_as_string", post(validVoucher(map[string]string{"stock": `"10"`})), 400, "stock must be an integer"},
		{"stock_over_limit", post(validVoucher(map[string]string{"stock": "2147483648"})), 400, "stock"},
		{"stock_beyond_int64", post(validVoucher(map[string]string{"stock": "99999999999999999999"})), 400, "stock must be an integer"},
		{"end_year_10000_after_offset", post(validVoucher(map[string]string{"endTime": `"9999-12-31T23:59:59-05:00"`})), 400, "endTime: must be within 2000-01-01 and 2100-01-01"},
		{"end_at_2100_utc", post(validVoucher(map[string]string{"endTime": `"2100-01-01T08:00:00"`})), 400, "endTime: must be within"},
		{"begin_before_2000", post(validVoucher(map[string]string{"beginTime": `"1999-12-31T23:59:59Z"`})), 400, "beginTime: must be within"},
		{"begin_year_zero", post(validVoucher(map[string]string{"beginTime": `"0000-01-01T00:00:00"`})), 400, "beginTime: must be within"},
		{"pay_value_beyond_int64", post(validVoucher(map[string]string{"payValue": "9223372036854775808"})), 400, "payValue must be an integer that fits 64 bits"},
		{"actual_value_exponent", post(validVoucher(map[string]string{"actualValue": "1e30"})), 400, "actualValue must be an integer"},
		{"shop_id_beyond_int64", post(validVoucher(map[string]string{"shopId": "-9223372036854775809"})), 400, "shopId must be an integer"},
		{"type_beyond_int", post(validVoucher(map[string]string{"type": "99999999999999999999"})), 400, "type must be an integer"},
		{"end_before_begin", post(validVoucher(map[string]string{"endTime": `"2026-11-29T19:00:00"`})), 400, "endTime: must be after beginTime"},
		{"end_equals_begin", post(validVoucher(map[string]string{"endTime": `"2026-11-29T20:00:00"`})), 400, "endTime: must be after beginTime"},
		{"end_before_begin_across_zones", post(validVoucher(map[string]string{"endTime": `"2026-11-29T20:30:00+09:00"`})), 400, "endTime: must be after beginTime"},
		{"end_already_passed", post(validVoucher(map[string]string{"endTime": `"2026-11-29T20:29:59"`})), 400, "endTime: must be later than now"},
		{"end_exactly_now", post(validVoucher(map[string]string{"endTime": `"2026-11-29T20:30:00"`})), 400, "endTime: must be later than now"},
		{"window_wholly_past", post(validVoucher(map[string]string{"beginTime": `"2026-11-28T20:00:00"`, "endTime": `"2026-11-28T22:00:00"`})), 400, "endTime: must be later than now"},
		{"begin_missing", post(validVoucher(map[string]string{"beginTime": "-"})), 400, "beginTime: is required"},
		{"begin_unparseable", post(validVoucher(map[string]string{"beginTime": `"2026/11/29 20:00"`})), 400, "beginTime: must look like"},
		{"begin_not_a_string", post(validVoucher(map[string]string{"beginTime": "1764417600"})), 400, "beginTime must be a string"},
		{"title_missing", post(validVoucher(map[string]string{"title": "-"})), 400, "title: is required"},
		{"title_blank", post(validVoucher(map[string]string{"title": `"   "`})), 400, "title: is required"},
		{"title_too_long", post(validVoucher(map[string]string{"title": `"` + strings.Repeat("券", 256) + `"`})), 400, "title: must be at most"},
		{"shop_missing", post(validVoucher(map[string]string{"shopId": "-"})), 400, "shopId"},
		{"shop_negative", post(validVoucher(map[string]string{"shopId": "-1"})), 400, "shopId"},
		{"pay_value_negative", post(validVoucher(map[string]string{"payValue": "-1"})), 400, "payValue"},
		{"normal_voucher_type", post(validVoucher(map[string]string{"type": "0"})), 400, "type: must be 1"},
		{"buckets_zero", post(validVoucher(map[string]string{"buckets": "0"})), 400, "buckets: must be between 1 and 16"},
		{"buckets_over_max", post(validVoucher(map[string]string{"buckets": "17", "stock": "100"})), 400, "buckets: must be between 1 and 16"},
		{"buckets_over_stock", post(validVoucher(map[string]string{"buckets": "11"})), 400, "buckets: must not exceed the stock"},
		{"buckets_as_string", post(validVoucher(map[string]string{"buckets": `"3"`})), 400, "buckets must be an integer"},

		// ids in paths
		{"claim_id_not_numeric", claim("abc"), 400, "id must be a positive integer"},
		{"claim_id_zero", claim("0"), 400, "id must be a positive integer"},
		{"claim_id_negative", claim("-1"), 400, "id must be a positive integer"},
		{"claim_id_signed", claim("+1"), 400, "id must be a positive integer"},
		{"claim_id_fractional", claim("1.5"), 400, "id must be a positive integer"},
		{"claim_id_with_space", claim("%201"), 400, "id must be a positive integer"},
		{"claim_id_beyond_int64", claim("9223372036854775808"), 400, "id is out of range"},
		{"claim_id_far_beyond_int64", claim("99999999999999999999999999"), 400, "id is out of range"},
		{"order_id_not_numeric", order("x1"), 400, "id must be a positive integer"},
		{"order_id_zero", order("0"), 400, "id must be a positive integer"},
		{"order_id_beyond_int64", order("18446744073709551616"), 400, "id is out of range"},
		{"shop_id_not_numeric", list("shop"), 400, "shopId must be a positive integer"},
		{"shop_id_zero", list("0"), 400, "shopId must be a positive integer"},
		{"shop_id_beyond_int64", list("9223372036854775808"), 400, "shopId is out of range"},

		// dev tokens
		{"token_user_beyond_int64", mint(`{"userId":9223372036854775808}`), 400, "userId must be an integer that fits 64 bits"},
		{"token_user_zero", mint(`{"userId":0}`), 400, "userId"},
		{"token_user_missing", mint(`{}`), 400, "userId"},
		{"token_user_as_string", mint(`{"userId":"42"}`), 400, "userId must be an integer"},
		{"token_unknown_field", mint(`{"user":42}`), 400, `unknown field "user"`},
		{"token_two_values", mint(`{"userId":42}{"userId":43}`), 400, "exactly one JSON value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.calls.snapshot()
			res := e.do(tc.r)
			code := "bad_request"
			if tc.status == http.StatusUnsupportedMediaType {
				code = "unsupported_media_type"
			}
			wantRefusal(t, res, tc.status, code, "")
			if !strings.Contains(res.ErrorMsg, tc.msg) {
				t.Fatalf("errorMsg %q does not say %q", res.ErrorMsg, tc.msg)
			}
			if after := e.calls.snapshot(); !equalCounts(before, after) {
				t.Fatalf("bad input reached a use case: port calls %v -> %v", before, after)
			}
			if vs := e.list("1"); len(vs) != 1 || *vs[0].Stock != 5 {
				t.Fatalf("shop 1 changed: %+v", vs)
			}
			if got := e.gateStock(voucher); got != 5 {
				t.Fatalf("gate stock = %d, want 5", got)
			}
			if n := e.queue.Len(); n != 0 {
				t.Fatalf("%d orders queued", n)
			}
		})
	}
	// Nothing was added by any case: the baseline vouchers are the only ones.
	if vs := e.list("2"); len(vs) != 1 {
		t.Fatalf("shop 2 has %d vouchers, want 1", len(vs))
	}
	if vs := e.list("1"); len(vs) != 1 || vs[0].ID != voucher {
		t.Fatalf("shop 1 holds %+v", vs)
	}
}

func TestUnknownRoutes(t *testing.T) {
	e := newEnv(t, options{})
	wantRefusal(t, e.do(req{method: "GET", path: "/nope"}), http.StatusNotFound, "not_found", "")
	wantRefusal(t, e.do(req{method: "DELETE", path: "/voucher/seckill"}), http.StatusMethodNotAllowed, "bad_request", "")
}

func TestAcceptedContentTypes(t *testing.T) {
	cases := []struct{ name, contentType string }{
		{"json", "application/json"},
		{"json_with_charset", "application/json; charset=utf-8"},
		{"json_suffix", "application/vnd.hmdp+json"},
		{"json_upper_case", "Application/JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, options{})
			e.mustOK(req{method: "POST", path: "/voucher/seckill", token: e.adminToken(), body: validVoucher(nil), header: map[string]string{"Content-Type": tc.contentType}})
			if vs := e.list("1"); len(vs) != 1 {
				t.Fatalf("shop 1 has %d vouchers, want 1", len(vs))
			}
		})
	}
}
