package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
)

type saleBoard struct {
	Queue       string `json:"queue"`
	QueueLength *int64 `json:"queueLength"`
	Sales       []struct {
		ID        string           `json:"id"`
		State     string           `json:"state"`
		GateStock *int             `json:"gateStock"`
		DBStock   int              `json:"dbStock"`
		Orders    int64            `json:"orders"`
		Failed    int64            `json:"failed"`
		Claims    map[string]int64 `json:"claims"`
	} `json:"sales"`
}

func (e *env) board() (saleBoard, int64) {
	e.t.Helper()
	res := e.mustOK(req{method: "GET", path: "/admin/sales.json", token: e.adminToken()})
	var b saleBoard
	if err := json.Unmarshal(res.Data, &b); err != nil {
		e.t.Fatalf("board: %v: %s", err, res.raw)
	}
	var total struct {
		Total int64 `json:"total"`
	}
	_ = json.Unmarshal([]byte(res.raw), &total)
	return b, total.Total
}

func TestSaleBoardIsForAdminsOnly(t *testing.T) {
	e := newEnv(t, options{})
	e.addVoucher(1, 10)
	before := e.calls.snapshot()
	wantRefusal(t, e.do(req{method: "GET", path: "/admin/sales.json"}), http.StatusUnauthorized, "unauthorized", "")
	wantRefusal(t, e.do(req{method: "GET", path: "/admin/sales.json", token: "no-such-token"}), http.StatusUnauthorized, "unauthorized", "")
	wantRefusal(t, e.do(req{method: "GET", path: "/admin/sales.json", token: e.token(42)}), http.StatusForbidden, "forbidden", "")
	if after := e.calls.snapshot(); !equalCounts(before, after) {
		t.Fatalf("a refused board request reached the backends: %v -> %v", before, after)
	}
}

// TestSaleBoardShowsClaimsStockAndOrders follows one sale through claims and
// fulfilment: every figure moves as it should.
func TestSaleBoardShowsClaimsStockAndOrders(t *testing.T) {
	e := newEnv(t, options{})
	id := e.addVoucher(1, 3)
	e.addVoucherWindow(2, 5, now.Add(time.Hour), now.Add(2*time.Hour)) // upcoming

	b, total := e.board()
	if total != 2 || len(b.Sales) != 2 || b.Sales[0].ID != id || b.Sales[0].State != "live" || b.Sales[1].State != "upcoming" {
		t.Fatalf("board before claims: total %d %+v", total, b)
	}
	if s := b.Sales[0]; s.GateStock == nil || *s.GateStock != 3 || s.DBStock != 3 || s.Orders != 0 || s.Claims["success"] != 0 {
		t.Fatalf("sale before claims: %+v", s)
	}

	tokens := make([]string, 4)
	for i := range tokens {
		tokens[i] = e.token(int64(100 + i))
	}
	for i, tok := range tokens[:3] {
		if res := e.claim(id, tok); !res.Success {
			t.Fatalf("claim: %s", res.raw)
		}
		if i == 0 {
			e.claim(id, tok) // duplicate, while stock is left
		}
	}
	e.claim(id, tokens[3]) // sold out
	e.claim("999", tokens[3])

	b, _ = e.board()
	s := b.Sales[0]
	want := map[string]int64{"success": 3, "duplicate": 1, "sold_out": 1, "not_found": 0, "busy": 0, "error": 0}
	for k, v := range want {
		if s.Claims[k] != v {
			t.Fatalf("claims = %v, want %v", s.Claims, want)
		}
	}
	if *s.GateStock != 0 || s.DBStock != 3 || s.Orders != 0 || b.Queue != "channel" || b.QueueLength == nil || *b.QueueLength != 3 {
		t.Fatalf("after claims, before fulfilment: queue %s len %v, sale %+v", b.Queue, b.QueueLength, s)
	}

	ds := e.drain(3)
	orders := make([]domain.VoucherOrder, len(ds))
	for i, d := range ds {
		orders[i] = d.Order
	}
	if _, err := e.fulfill.Handle(context.Background(), orders); err != nil {
		t.Fatal(err)
	}
	b, _ = e.board()
	if s := b.Sales[0]; s.DBStock != 0 || s.Orders != 3 || s.Failed != 0 || *b.QueueLength != 0 {
		t.Fatalf("after fulfilment: queue len %d, sale %+v", *b.QueueLength, s)
	}
}

// TestSaleBoardIsCapped: however many sales are scheduled, one request reads
// at most MaxSaleBoard of them; total says how many there are.
func TestSaleBoardIsCapped(t *testing.T) {
	e := newEnv(t, options{})
	n := application.MaxSaleBoard + 3
	for i := 0; i < n; i++ {
		e.addVoucher(int64(i+1), 1)
	}
	before := e.calls.snapshot()
	b, total := e.board()
	if len(b.Sales) != application.MaxSaleBoard || total != int64(n) {
		t.Fatalf("board shows %d of total %d; want %d of %d", len(b.Sales), total, application.MaxSaleBoard, n)
	}
	if after := e.calls.snapshot(); !equalCounts(before, after) {
		t.Fatalf("the board went through the claim path's ports: %v -> %v", before, after)
	}
}

func TestSalePageAndAssets(t *testing.T) {
	e := newEnv(t, options{})
	cases := []struct {
		path, contentType, contains string
	}{
		{"/admin/sales", "text/html; charset=utf-8", `src="/admin/assets/sales.js"`},
		{"/admin/assets/sales.js", "text/javascript; charset=utf-8", "/admin/sales.json"},
		{"/admin/assets/sales.css", "text/css; charset=utf-8", "@media"},
		{"/admin/assets/uPlot.iife.min.js", "text/javascript; charset=utf-8", "uPlot"},
		{"/admin/assets/uPlot.min.css", "text/css; charset=utf-8", ".uplot"},
	}
	for _, c := range cases {
		w := e.raw(req{method: "GET", path: c.path})
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != c.contentType || !strings.Contains(w.Body.String(), c.contains) {
			t.Fatalf("GET %s: %d %q, body has %q: %v", c.path, w.Code, w.Header().Get("Content-Type"), c.contains, strings.Contains(w.Body.String(), c.contains))
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-eval") {
			t.Fatalf("GET %s: CSP %q", c.path, csp)
		}
	}
	for _, p := range []string{"/admin/assets/sales.html", "/admin/assets/..%2fsales.html", "/admin/assets/uPlot.LICENSE", "/admin/assets/nope.js"} {
		res := e.do(req{method: "GET", path: p})
		if res.status != http.StatusNotFound {
			t.Fatalf("GET %s: %d %s, want 404", p, res.status, res.raw)
		}
	}
}

// TestSaleBoardTellsALostGate: a voucher the gate lost shows no gate stock
// rather than a zero that reads as "sold out".
func TestSaleBoardTellsALostGate(t *testing.T) {
	e := newEnv(t, options{})
	id, _ := strconv.ParseInt(e.addVoucher(1, 3), 10, 64)
	e.gate.Forget(domain.VoucherID(id))
	b, _ := e.board()
	if b.Sales[0].GateStock != nil {
		t.Fatalf("a voucher the gate lost shows gate stock %d", *b.Sales[0].GateStock)
	}
}
