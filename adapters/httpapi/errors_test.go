package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// logLines returns the JSON log lines that contain s.
func (e *env) logLines(s string) []map[string]any {
	e.t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
		if !strings.Contains(line, s) {
			continue
		}
		m := map[string]any{}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber() // order ids exceed what a float64 holds exactly
		if err := dec.Decode(&m); err != nil {
			e.t.Fatalf("log line is not JSON: %v: %s", err, line)
		}
		out = append(out, m)
	}
	return out
}

func TestInternalErrorIsLoggedOnceAndNotLeaked(t *testing.T) {
	const secret = "dial tcp 10.1.2.3:3306: access denied for user seckill"
	cases := []struct {
		name  string
		setup func(*env)
		r     req
	}{
		{
			name:  "wrapped_repository_error",
			setup: func(e *env) { e.vouchers.listErr = fmt.Errorf("query: %w", errors.New(secret)) },
			r:     req{method: "GET", path: "/voucher/list/1"},
		},
		{
			name:  "panic_in_a_use_case",
			setup: func(e *env) { e.vouchers.listPanic = true },
			r:     req{method: "GET", path: "/voucher/list/1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, options{})
			tc.setup(e)
			tc.r.header = map[string]string{"X-Request-Id": "req-42"}
			res := e.do(tc.r)
			wantRefusal(t, res, http.StatusInternalServerError, "internal", "服务器异常")
			if res.requestID != "req-42" {
				t.Fatalf("500 carries request id %q, want req-42", res.requestID)
			}
			for _, leak := range []string{"10.1.2.3", "secret", "boom", "panic", "query"} {
				if strings.Contains(res.raw, leak) {
					t.Fatalf("answer leaks %q: %s", leak, res.raw)
				}
			}
			lines := e.logLines("req-42")
			if len(lines) != 1 {
				t.Fatalf("request logged on %d lines, want 1: %s", len(lines), e.logs.String())
			}
			l := lines[0]
			errText, _ := l["error"].(string)
			if l["level"] != "error" || l["status"] != json.Number("500") || len(errText) < 20 {
				t.Fatalf("log line = %v", l)
			}
			if strings.Count(e.logs.String(), errText[:20]) != 1 {
				t.Fatalf("error detail logged more than once: %s", e.logs.String())
			}
		})
	}
}

func TestSessionStoreErrors(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		// Redis down or failing over: nothing was done, try again; never a 500.
		{"store_down_is_busy", errors.New("dial tcp 127.0.0.1:6379: connect: connection refused"), 503, "busy"},
		{"wrapped_unknown_token_is_unauthorized", fmt.Errorf("hgetall login:token: %w", ports.ErrUnknownToken), 401, "unauthorized"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, options{sessions: sessionsFunc(func(context.Context, string) (domain.UserID, error) {
				return 0, tc.err
			})})
			voucher := e.addVoucher(1, 1)
			wantRefusal(t, e.claim(voucher, "some-token"), tc.status, tc.code, "")
			if got := e.gateStock(voucher); got != 1 {
				t.Fatalf("gate stock = %d, want 1", got)
			}
		})
	}
}

// lostReply reserves through the real admission, then reports what a Redis
// that died before answering reports: the claim may have been taken.
type lostReply struct{ ports.Admission }

func (a lostReply) Admit(ctx context.Context, o domain.VoucherOrder) error {
	if err := a.Admission.Admit(ctx, o); err != nil {
		return err
	}
	return errors.New("read tcp 127.0.0.1:50000->127.0.0.1:6379: read: connection reset by peer")
}

func TestClaimWhoseOutcomeIsUnknownAnswersItsOrderID(t *testing.T) {
	e := newEnv(t, options{admission: func(a ports.Admission) ports.Admission { return lostReply{a} }})
	voucher := e.addVoucher(1, 5)
	tok := e.token(42)
	res := e.claim(voucher, tok)
	if res.status != http.StatusServiceUnavailable || res.Success || res.Code != "outcome_unknown" || res.ErrorMsg == "" {
		t.Fatalf("answer = %d %s; want 503 outcome_unknown with a message", res.status, res.raw)
	}
	if res.retryAfter != "1" {
		t.Fatalf("Retry-After = %q, want 1", res.retryAfter)
	}
	var id string
	if err := json.Unmarshal(res.Data, &id); err != nil || id == "" {
		t.Fatalf("data = %s; want the order id as a string", res.Data)
	}
	// The status endpoint resolves it: the reservation was made.
	st := e.do(req{method: "GET", path: "/voucher-order/" + id, token: tok})
	if st.status != http.StatusOK || !strings.Contains(string(st.Data), `"state":"queued"`) {
		t.Fatalf("status of the unknown claim's order = %d %s; want it queued", st.status, st.raw)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	var readyErr error
	var sawDeadline bool
	e := newEnv(t, options{readTTL: -1, ready: func(ctx context.Context) error {
		_, sawDeadline = ctx.Deadline()
		return readyErr
	}})

	e.mustOK(req{method: "GET", path: "/readyz"})
	if !sawDeadline {
		t.Fatal("readiness probe runs without a deadline")
	}
	readyErr = fmt.Errorf("ping mysql: %w", errors.New("dial tcp 10.9.9.9:3306: i/o timeout"))
	res := e.do(req{method: "GET", path: "/readyz"})
	wantRefusal(t, res, http.StatusServiceUnavailable, "unavailable", "not ready")
	if strings.Contains(res.raw, "10.9.9.9") || strings.Contains(res.raw, "mysql") {
		t.Fatalf("readyz leaks its cause: %s", res.raw)
	}
	if len(e.logLines("10.9.9.9")) != 1 {
		t.Fatalf("the cause is not logged once: %s", e.logs.String())
	}
	// Liveness does not depend on the backends.
	e.mustOK(req{method: "GET", path: "/healthz"})
}

func TestDevTokensEndpoint(t *testing.T) {
	t.Run("absent_without_issuer", func(t *testing.T) {
		e := newEnv(t, options{noTokens: true})
		wantRefusal(t, e.do(req{method: "POST", path: "/dev/tokens", body: `{"userId":42}`}), http.StatusNotFound, "not_found", "")
	})
	t.Run("minted_token_authenticates", func(t *testing.T) {
		e := newEnv(t, options{})
		voucher := e.addVoucher(1, 1)
		order := e.mustOK(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: e.token(42)}).dataString(t)
		if order == "" {
			t.Fatal("no order id")
		}
	})
}

func TestNewRouterRefusesMissingDeps(t *testing.T) {
	clock := testenv.NewClock(now)
	vouchers, gate, sessions := memory.NewVouchers(), memory.NewGate(clock), memory.NewSessions()
	orders := memory.NewOrders(vouchers)
	full := func() httpapi.Deps {
		return httpapi.Deps{
			AddVoucher:   application.NewAddSeckillVoucher(vouchers, orders, gate),
			ListVouchers: application.NewListShopVouchers(vouchers),
			Claim:        application.NewClaimSeckill(memory.NewIDs(clock), chanqueue.NewAdmission(gate, chanqueue.New(1, 0))),
			GetOrder:     application.NewGetOrder(orders, gate),
			Sessions:     sessions,
			Ready:        func(context.Context) error { return nil },
		}
	}
	cases := []struct {
		name   string
		mutate func(*httpapi.Deps)
		panics bool
	}{
		{"complete", func(*httpapi.Deps) {}, false},
		{"optional_fields_zero", func(d *httpapi.Deps) {
			d.Tokens, d.Location, d.MaxBodyBytes, d.Log = nil, nil, 0, zerolog.Logger{}
		}, false},
		{"no_add_voucher", func(d *httpapi.Deps) { d.AddVoucher = nil }, true},
		{"no_list_vouchers", func(d *httpapi.Deps) { d.ListVouchers = nil }, true},
		{"no_claim", func(d *httpapi.Deps) { d.Claim = nil }, true},
		{"no_get_order", func(d *httpapi.Deps) { d.GetOrder = nil }, true},
		{"no_sessions", func(d *httpapi.Deps) { d.Sessions = nil }, true},
		{"no_ready", func(d *httpapi.Deps) { d.Ready = nil }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := full()
			tc.mutate(&d)
			defer func() {
				if r := recover(); (r != nil) != tc.panics {
					t.Fatalf("panic = %v, want panic: %v", r, tc.panics)
				}
			}()
			_ = httpapi.NewRouter(d)
		})
	}
	// With several missing, the first in Deps's order is named, every time.
	for range 20 {
		func() {
			d := full()
			d.Ready, d.Claim, d.Sessions = nil, nil, nil
			defer func() {
				if r := recover(); r != "httpapi: Deps.Claim is nil" {
					t.Fatalf("panic = %v, want the first missing dependency, Claim", r)
				}
			}()
			_ = httpapi.NewRouter(d)
		}()
	}
}

func TestOrderStatusShowsFailureReason(t *testing.T) {
	e := newEnv(t, options{})
	voucher := e.addVoucher(1, 1)
	alice := e.token(1)
	id := e.mustOK(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: alice}).dataString(t)
	n, _ := strconv.ParseInt(id, 10, 64)
	vid, _ := strconv.ParseInt(voucher, 10, 64)
	o, err := domain.NewVoucherOrder(domain.OrderID(n), 1, domain.VoucherID(vid))
	if err != nil {
		t.Fatal(err)
	}
	e.orders.find = func(context.Context, domain.OrderID) (domain.OrderStatus, error) {
		return domain.OrderStatus{Order: o, State: domain.OrderFailed, Reason: domain.FailOutOfStock}, nil
	}
	res, got := e.order(id, alice)
	if res.status != http.StatusOK || got.State != "failed" || got.Reason == nil || *got.Reason != "out_of_stock" {
		t.Fatalf("failed order: %d %s", res.status, res.raw)
	}
	// Not even its failure is shown to another user.
	res, _ = e.order(id, e.token(2))
	wantRefusal(t, res, http.StatusNotFound, "not_found", "")
}

func TestListOmitsSaleOfNormalVouchers(t *testing.T) {
	e := newEnv(t, options{})
	if _, err := e.stored.AddNormal(context.Background(), domain.VoucherSpec{ShopID: 4, Title: "normal", PayValue: 100, ActualValue: 200}); err != nil {
		t.Fatal(err)
	}
	seckill := e.addVoucher(4, 3)
	res := e.mustOK(req{method: "GET", path: "/voucher/list/4"})
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(res.Data, &raw); err != nil || len(raw) != 2 {
		t.Fatalf("list: %v: %s", err, res.raw)
	}
	for _, k := range []string{"stock", "beginTime", "endTime"} {
		if _, ok := raw[0][k]; ok {
			t.Fatalf("normal voucher carries %q: %s", k, res.raw)
		}
		if _, ok := raw[1][k]; !ok {
			t.Fatalf("seckill voucher lacks %q: %s", k, res.raw)
		}
	}
	if string(raw[1]["id"]) != strconv.Quote(seckill) {
		t.Fatalf("seckill voucher id = %s, want %q", raw[1]["id"], seckill)
	}
}

func TestClaimLogLine(t *testing.T) {
	e := newEnv(t, options{})
	voucher := e.addVoucher(1, 1)
	tok := e.token(5)
	res := e.do(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: tok, header: map[string]string{"X-Request-Id": "claim-7"}})
	order := res.dataString(t)

	var claim map[string]any
	for _, l := range e.logLines("claim-7") {
		if l["message"] == "seckill claim" {
			claim = l
		}
	}
	if claim == nil {
		t.Fatalf("no claim line: %s", e.logs.String())
	}
	if claim["level"] != "debug" || claim["voucher"] != json.Number(voucher) || claim["user"] != json.Number("5") ||
		claim["order"] != json.Number(order) {
		t.Fatalf("claim line = %v (order %s)", claim, order)
	}

	// A client's over-long request id is not copied into the logs.
	long := strings.Repeat("a", 200)
	e.do(req{method: "GET", path: "/healthz", header: map[string]string{"X-Request-Id": long}})
	if len(e.logLines(long)) != 0 {
		t.Fatal("an over-long request id reached the logs")
	}
}

// A request without a usable X-Request-Id gets one made here (host/random-
// sequence, made only when something asks for it): a 500's answer carries
// it, and it is the one on the request's log line, distinct per request.
func TestRequestWithoutAnIDGetsOneWhenItIsNeeded(t *testing.T) {
	e := newEnv(t, options{})
	e.vouchers.listErr = errors.New("db down")
	seen := map[string]bool{}
	for _, header := range []map[string]string{nil, {"X-Request-Id": strings.Repeat("a", 200)}, {"X-Request-Id": "bad id"}} {
		res := e.do(req{method: "GET", path: "/voucher/list/1", header: header})
		wantRefusal(t, res, http.StatusInternalServerError, "internal", "服务器异常")
		id := res.requestID
		if !regexp.MustCompile(`^[^/\s]+/[0-9a-f]{10}-\d{6,}$`).MatchString(id) {
			t.Fatalf("500 carries request id %q, want one made here (host/random-sequence)", id)
		}
		if seen[id] {
			t.Fatalf("request id %q given twice", id)
		}
		seen[id] = true
		lines := e.logLines(`"request_id":"` + id + `"`)
		if len(lines) != 1 || lines[0]["status"] != json.Number("500") {
			t.Fatalf("log lines with request id %s = %v, want the request's one line:\n%s", id, lines, e.logs.String())
		}
	}
}
