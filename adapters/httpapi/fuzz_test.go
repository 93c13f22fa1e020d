package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// The fuzz targets run requests through the real router over the memory
// fakes and assert what must hold for any input: no panic, no 5xx, and an
// envelope that says why when it refuses. Seeds are in testdata/fuzz; `make
// fuzz` runs each target for a few seconds.

// serve sends r and checks the answer; it returns the status.
func serve(t *testing.T, e *env, r *http.Request) int {
	t.Helper()
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	if w.Code >= 500 {
		t.Fatalf("%s %q: %d %s", r.Method, r.URL.String(), w.Code, w.Body.String())
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %q: Content-Type %q", r.Method, r.URL.String(), ct)
	}
	var env struct {
		Success  bool   `json:"success"`
		ErrorMsg string `json:"errorMsg"`
		Code     string `json:"code"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil {
		t.Fatalf("%s %q: answer is not an envelope: %v: %s", r.Method, r.URL.String(), err, w.Body.String())
	}
	if !env.Success && (env.ErrorMsg == "" || env.Code == "") {
		t.Fatalf("%s %q: refusal without errorMsg or code: %s", r.Method, r.URL.String(), w.Body.String())
	}
	return w.Code
}

// fuzzEnv logs at info, as production does, so that a long run does not pile
// up debug lines in memory; its queue is large enough never to shed load.
func fuzzEnv(f *testing.F) *env {
	return newEnv(f, options{quiet: true, queueCap: 1 << 16})
}

func jsonPost(path, token string, body []byte) *http.Request {
	r := httptest.NewRequest("POST", path, strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	if token != "" {
		r.Header.Set("Authorization", token)
	}
	return r
}

func FuzzVoucherBody(f *testing.F) {
	e := fuzzEnv(f)
	admin := e.adminToken()
	f.Add([]byte(validVoucher(nil)))
	f.Add([]byte(`{"stock":5,"STOCK":1}`))
	f.Add([]byte(`{"endTime":"9999-12-31T23:59:59-05:00"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		before := e.calls.snapshot()
		if status := serve(t, e, jsonPost("/voucher/seckill", admin, body)); status != http.StatusOK {
			// A refusal changes nothing: no write, no preheat.
			if after := e.calls.snapshot(); !equalCounts(before, after) {
				t.Fatalf("refused body %q reached the ports: %v -> %v", body, before, after)
			}
		}
	})
}

func FuzzTokenBody(f *testing.F) {
	e := fuzzEnv(f)
	f.Add([]byte(`{"userId":42}`))
	f.Add([]byte(`{"userId":9223372036854775808}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		serve(t, e, jsonPost("/dev/tokens", "", body))
	})
}

// FuzzPathID sends any path segment where an id goes, escaped as a client
// would, on every route that takes one.
func FuzzPathID(f *testing.F) {
	e := fuzzEnv(f)
	voucher := e.addVoucher(1, 10)
	token := e.token(1)
	f.Add(voucher)
	f.Add("9223372036854775808")
	f.Add("-1")
	f.Fuzz(func(t *testing.T, id string) {
		for _, route := range []struct{ method, prefix, token string }{
			{"POST", "/voucher-order/seckill/", token},
			{"GET", "/voucher-order/", token},
			{"GET", "/voucher/list/", ""},
		} {
			u, err := url.Parse(route.prefix + url.PathEscape(id))
			if err != nil {
				t.Skip() // no client could send it
			}
			r := httptest.NewRequest(route.method, "/", nil)
			r.URL = u
			r.RequestURI = u.RequestURI()
			if route.token != "" {
				r.Header.Set("Authorization", route.token)
			}
			serve(t, e, r)
		}
	})
}

// FuzzAuthorizationHeader: a header that is not exactly a known token is a
// 401, on a user endpoint and on an admin one, whatever it holds.
func FuzzAuthorizationHeader(f *testing.F) {
	e := fuzzEnv(f)
	voucher := e.addVoucher(1, 10)
	admin := e.adminToken()
	user := e.token(1)
	f.Add("")
	f.Add("Bearer x")
	f.Add(" \t")
	f.Fuzz(func(t *testing.T, h string) {
		// The fuzzed value, and the real tokens bent by it, so that
		// near-misses of a valid token are tried too.
		for _, v := range []string{h, admin + h, h + user, " " + user, "Bearer " + admin} {
			known := v == admin || v == user
			for _, r := range []*http.Request{
				jsonPost("/voucher/seckill", "", []byte(validVoucher(nil))),
				httptest.NewRequest("POST", "/voucher-order/seckill/"+voucher, nil),
				httptest.NewRequest("GET", "/voucher-order/1", nil),
			} {
				r.Header["Authorization"] = []string{v} // as sent, not canonicalised
				status := serve(t, e, r)
				if !known && status != http.StatusUnauthorized {
					t.Fatalf("%s %s with authorization %q: %d, want 401", r.Method, r.URL.Path, v, status)
				}
			}
		}
	})
}
