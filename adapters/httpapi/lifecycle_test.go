package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
)

type lifeOut struct {
	State       string `json:"state"`
	Reason      string `json:"reason"`
	PayDeadline string `json:"payDeadline"`
	Payment     *struct {
		TransactionID string `json:"transactionId"`
		Kind          string `json:"kind"`
		RefundOwed    bool   `json:"refundOwed"`
	} `json:"payment"`
}

// sold claims for token and writes the order to the database; its id.
func (e *env) sold(voucher, token string) string {
	e.t.Helper()
	id := e.claim(voucher, token).dataString(e.t)
	e.fulfilQueued(1)
	return id
}

func (e *env) fulfilQueued(n int) {
	e.t.Helper()
	var orders []domain.VoucherOrder
	for _, d := range e.drain(n) {
		orders = append(orders, d.Order)
	}
	if _, err := e.fulfill.Handle(context.Background(), orders); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) life(res result) lifeOut {
	e.t.Helper()
	var o lifeOut
	if err := json.Unmarshal(res.Data, &o); err != nil {
		e.t.Fatalf("order data: %v: %s", err, res.raw)
	}
	return o
}

func (e *env) stateOf(id, token string) lifeOut {
	e.t.Helper()
	return e.life(e.mustOK(req{method: "GET", path: "/voucher-order/" + id, token: token}))
}

func (e *env) notify(body string, header map[string]string) result {
	e.t.Helper()
	if header == nil {
		header = map[string]string{httpapi.SignatureHeader: httpapi.Sign([]byte(paySecret), []byte(body))}
	}
	return e.do(req{method: "POST", path: "/payments/notify", body: body, header: header})
}

func payBody(id string, amount int64) string {
	return fmt.Sprintf(`{"orderId":%q,"amount":%d,"transactionId":"wx-%s"}`, id, amount, id)
}

func TestOrderStatusLifecycle(t *testing.T) {
	e := newEnv(t, options{})
	v, tok := e.addVoucher(1, 2), e.token(7)
	id := e.sold(v, tok)
	n, _ := strconv.ParseInt(id, 10, 64)
	want := domain.OrderID(n).Time().Add(payWindow).UTC().Format(time.RFC3339)
	if got := e.stateOf(id, tok); got.State != "created" || got.PayDeadline != want || got.Reason != "" {
		t.Fatalf("created order = %+v, want payDeadline %s", got, want)
	}
	e.clock.Advance(payWindow)
	expire := application.NewExpireOrders(e.ledger, e.gate, e.clock, 10)
	if res, err := expire.Handle(context.Background()); err != nil || res.Expired != 1 {
		t.Fatalf("expire: %+v, %v", res, err)
	}
	if got := e.stateOf(id, tok); got.State != "cancelled" || got.Reason != "expired" || got.PayDeadline != "" {
		t.Fatalf("expired order = %+v", got)
	}
	if e.gateStock(v) != 2 {
		t.Fatalf("gate stock %d, want the unit back", e.gateStock(v))
	}
	// The expired order forfeited the buyer's place: claiming again is the
	// original's "不能重复下单", and the unit is another buyer's.
	if res := e.claim(v, tok); res.status != http.StatusOK || res.Success || res.Code != "duplicate" {
		t.Fatalf("the buyer claims again: %d %s; want 200 duplicate", res.status, res.raw)
	}
	other := e.token(43)
	if again := e.sold(v, other); again == id || e.stateOf(again, other).State != "created" {
		t.Fatalf("another buyer's claim = %s", again)
	}
}

func TestCancelOrderHTTP(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(e *env, v, tok string) string
		other      bool // cancel with another user's token
		wantStatus int
		wantCode   string
		wantState  string // after, as GET answers
		wantStock  int
	}{
		{name: "unpaid", setup: func(e *env, v, tok string) string { return e.sold(v, tok) },
			wantStatus: 200, wantState: "cancelled", wantStock: 1},
		{name: "cancelled_again", setup: func(e *env, v, tok string) string {
			id := e.sold(v, tok)
			e.mustOK(req{method: "POST", path: "/voucher-order/" + id + "/cancel", token: tok})
			return id
		}, wantStatus: 200, wantState: "cancelled", wantStock: 1},
		{name: "paid", setup: func(e *env, v, tok string) string {
			id := e.sold(v, tok)
			if res := e.notify(payBody(id, 8000), nil); !res.Success {
				e.t.Fatalf("pay: %s", res.raw)
			}
			return id
		}, wantStatus: 200, wantCode: "already_paid", wantState: "paid"},
		{name: "someone_elses", setup: func(e *env, v, tok string) string { return e.sold(v, tok) },
			other: true, wantStatus: 404, wantCode: "not_found", wantState: "created"},
		{name: "unknown", setup: func(e *env, v, tok string) string { return "123456789" },
			wantStatus: 404, wantCode: "not_found", wantStock: 1},
		{name: "queued", setup: func(e *env, v, tok string) string { return e.claim(v, tok).dataString(e.t) },
			wantStatus: 503, wantCode: "busy", wantState: "queued"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, options{})
			v, tok := e.addVoucher(1, 1), e.token(7)
			id := tt.setup(e, v, tok)
			as := tok
			if tt.other {
				as = e.token(8)
			}
			res := e.do(req{method: "POST", path: "/voucher-order/" + id + "/cancel", token: as})
			if res.status != tt.wantStatus || res.Code != tt.wantCode || res.Success != (tt.wantCode == "") {
				t.Fatalf("cancel: %d %s, want %d code %q", res.status, res.raw, tt.wantStatus, tt.wantCode)
			}
			if tt.wantStatus == 503 && res.retryAfter == "" {
				t.Fatal("busy without Retry-After")
			}
			if tt.wantCode == "" && e.life(res).State != tt.wantState {
				t.Fatalf("answer %s, want state %s", res.raw, tt.wantState)
			}
			if tt.wantState != "" {
				if got := e.stateOf(id, tok); got.State != tt.wantState {
					t.Fatalf("recorded %+v, want %s", got, tt.wantState)
				}
			}
			if e.gateStock(v) != tt.wantStock {
				t.Fatalf("gate stock %d, want %d", e.gateStock(v), tt.wantStock)
			}
		})
	}
}

func TestPaymentNotify(t *testing.T) {
	big := `{"orderId":"1","amount":8000,"transactionId":"` + strings.Repeat("x", 5000) + `"}`
	tests := []struct {
		name       string
		setup      func(e *env, v, tok string) string // the order id
		body       func(id string) string
		header     func(body string) map[string]string // nil: signed right
		wantStatus int
		wantCode   string
		wantState  string // recorded after
		wantKind   string // data.payment.kind of a 200
	}{
		{name: "unpaid_becomes_paid", body: func(id string) string { return payBody(id, 8000) },
			wantStatus: 200, wantState: "paid", wantKind: "settled"},
		{name: "same_notification_again", setup: func(e *env, v, tok string) string {
			id := e.sold(v, tok)
			e.notify(payBody(id, 8000), nil)
			return id
		}, body: func(id string) string { return payBody(id, 8000) }, wantStatus: 200, wantState: "paid", wantKind: "settled"},
		{name: "another_transaction_on_a_paid_order_is_a_double_charge", setup: func(e *env, v, tok string) string {
			id := e.sold(v, tok)
			e.notify(payBody(id, 8000), nil)
			return id
		}, body: func(id string) string {
			return `{"orderId":"` + id + `","amount":8000,"transactionId":"wx-again"}`
		}, wantStatus: 200, wantState: "paid", wantKind: "double"},
		{name: "a_failed_order_is_recorded_as_owed_back", setup: func(e *env, v, tok string) string {
			vid, _ := strconv.ParseInt(v, 10, 64)
			oid, err := domain.NewOrderID(now, 4242)
			if err != nil {
				e.t.Fatal(err)
			}
			o, err := domain.NewVoucherOrder(oid, 8, domain.VoucherID(vid))
			if err != nil {
				e.t.Fatal(err)
			}
			if _, err := e.ledger.MarkFailed(context.Background(), []domain.VoucherOrder{o}, domain.FailOutOfStock); err != nil {
				e.t.Fatal(err)
			}
			return strconv.FormatInt(int64(o.ID()), 10)
		}, body: func(id string) string { return payBody(id, 8000) }, wantStatus: 200, wantKind: "unsold"},
		{name: "missing_signature", body: func(id string) string { return payBody(id, 8000) },
			header:     func(string) map[string]string { return map[string]string{httpapi.SignatureHeader: ""} },
			wantStatus: 401, wantCode: "unauthorized", wantState: "created"},
		{name: "wrong_secret", body: func(id string) string { return payBody(id, 8000) },
			header: func(b string) map[string]string {
				return map[string]string{httpapi.SignatureHeader: httpapi.Sign([]byte("guess"), []byte(b))}
			}, wantStatus: 401, wantCode: "unauthorized", wantState: "created"},
		{name: "upper_case_signature", body: func(id string) string { return payBody(id, 8000) },
			header: func(b string) map[string]string {
				return map[string]string{httpapi.SignatureHeader: strings.ToUpper(httpapi.Sign([]byte(paySecret), []byte(b)))}
			}, wantStatus: 401, wantCode: "unauthorized", wantState: "created"},
		{name: "signature_of_another_body", body: func(id string) string { return payBody(id, 8000) },
			header: func(string) map[string]string {
				return map[string]string{httpapi.SignatureHeader: httpapi.Sign([]byte(paySecret), []byte(payBody("1", 8000)))}
			}, wantStatus: 401, wantCode: "unauthorized", wantState: "created"},
		{name: "wrong_amount", body: func(id string) string { return payBody(id, 1) },
			wantStatus: 400, wantCode: "bad_request", wantState: "created"},
		{name: "amount_missing", body: func(id string) string { return `{"orderId":"` + id + `","transactionId":"t"}` },
			wantStatus: 400, wantCode: "bad_request", wantState: "created"},
		{name: "unknown_field", body: func(id string) string {
			return `{"orderId":"` + id + `","amount":8000,"transactionId":"t","status":"paid"}`
		}, wantStatus: 400, wantCode: "bad_request", wantState: "created"},
		{name: "duplicate_key", body: func(id string) string {
			return `{"orderId":"1","orderId":"` + id + `","amount":8000,"transactionId":"t"}`
		}, wantStatus: 400, wantCode: "bad_request", wantState: "created"},
		{name: "order_id_not_canonical", body: func(id string) string { return payBody("0"+id, 8000) },
			wantStatus: 400, wantCode: "bad_request", wantState: "created"},
		{name: "too_large", body: func(string) string { return big }, wantStatus: 413, wantCode: "bad_request", wantState: "created"},
		{name: "unknown_old_order", setup: func(e *env, v, tok string) string {
			old, _ := domain.NewOrderID(now.Add(-2*payWindow), 1)
			return strconv.FormatInt(int64(old), 10)
		}, body: func(id string) string { return payBody(id, 8000) }, wantStatus: 404, wantCode: "not_found"},
		{name: "queued", setup: func(e *env, v, tok string) string { return e.claim(v, tok).dataString(e.t) },
			body: func(id string) string { return payBody(id, 8000) }, wantStatus: 503, wantCode: "busy", wantState: "queued"},
		{name: "after_cancel_refunding", setup: func(e *env, v, tok string) string {
			id := e.sold(v, tok)
			e.mustOK(req{method: "POST", path: "/voucher-order/" + id + "/cancel", token: tok})
			return id
		}, body: func(id string) string { return payBody(id, 8000) }, wantStatus: 200, wantState: "refunding", wantKind: "late"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, options{})
			v, tok := e.addVoucher(1, 1), e.token(7)
			setup := tt.setup
			if setup == nil {
				setup = func(e *env, v, tok string) string { return e.sold(v, tok) }
			}
			id := setup(e, v, tok)
			body := tt.body(id)
			var header map[string]string
			if tt.header != nil {
				header = tt.header(body)
			}
			res := e.notify(body, header)
			if res.status != tt.wantStatus || res.Code != tt.wantCode || res.Success != (tt.wantCode == "") {
				t.Fatalf("notify: %d %s, want %d code %q", res.status, res.raw, tt.wantStatus, tt.wantCode)
			}
			if tt.wantKind != "" {
				if p := e.life(res).Payment; p == nil || p.Kind != tt.wantKind || p.RefundOwed != (tt.wantKind != "settled") {
					t.Fatalf("payment %s, want kind %s", res.raw, tt.wantKind)
				}
			}
			if tt.wantState != "" {
				if got := e.stateOf(id, tok); got.State != tt.wantState {
					t.Fatalf("recorded %+v, want %s", got, tt.wantState)
				}
			}
		})
	}
}

func TestPaymentNotifyUnmountedWithoutSecret(t *testing.T) {
	e := newEnv(t, options{noPayments: true})
	v, tok := e.addVoucher(1, 1), e.token(7)
	id := e.sold(v, tok)
	res := e.notify(payBody(id, 8000), nil)
	if res.status != http.StatusNotFound {
		t.Fatalf("notify without a secret: %d %s, want 404", res.status, res.raw)
	}
	if got := e.stateOf(id, tok); got.State != "created" {
		t.Fatalf("recorded %+v", got)
	}
}

// TestAStalledRedisIsAnsweredWithinTheBudget: requests that wait on Redis
// are bounded by the claim's budget. A cancel whose unit is going back to a
// stalled Redis (it took ~8 s before, with no deadline of its own) is
// answered cancelled once the budget ends: MySQL has it, and the expiry
// loop gives the unit back later. The live sale page's figures, which need
// Redis, answer 503 busy with Retry-After (they answered 500).
func TestAStalledRedisIsAnsweredWithinTheBudget(t *testing.T) {
	var stall atomic.Bool
	e := newEnv(t, options{stall: &stall})
	v := e.addVoucher(1, 5)
	tok := e.token(42)
	id := e.sold(v, tok)
	stall.Store(true)
	before := unboundedStalls.Load()

	if got := e.life(e.do(req{method: "POST", path: "/voucher-order/" + id + "/cancel", token: tok})); got.State != "cancelled" {
		t.Fatalf("cancel with Redis stalled: %+v; want cancelled", got)
	}
	if n := unboundedStalls.Load() - before; n != 0 {
		t.Fatalf("the cancel waited on the stalled Redis %d times without a deadline", n)
	}
	res := e.do(req{method: "GET", path: "/admin/sales.json", token: e.adminToken()})
	if res.status != http.StatusServiceUnavailable || res.Code != "busy" || res.retryAfter == "" {
		t.Fatalf("sales.json with Redis stalled: %d %s (Retry-After %q); want 503 busy with Retry-After", res.status, res.raw, res.retryAfter)
	}
}
