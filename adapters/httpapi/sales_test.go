package httpapi_test

import (
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
	Queue       string    `json:"queue"`
	QueueLength *int64    `json:"queueLength"`
	Sales       []saleOut `json:"sales"`
}

type saleOut struct {
	ID        string           `json:"id"`
	State     string           `json:"state"`
	Paused    bool             `json:"paused"`
	Added     int              `json:"added"`
	GateStock *int             `json:"gateStock"`
	DBStock   int              `json:"dbStock"`
	Orders    int64            `json:"orders"`
	Failed    int64            `json:"failed"`
	Unpaid    int64            `json:"unpaid"`
	Paid      int64            `json:"paid"`
	Cancelled int64            `json:"cancelled"`
	Refunding int64            `json:"refunding"`
	Returned  int64            `json:"returned"`
	Claims    map[string]int64 `json:"claims"`
	Balance   struct {
		Initial  int    `json:"initial"`
		InFlight int    `json:"inFlight"`
		Holds    bool   `json:"holds"`
		Problem  string `json:"problem"`
	} `json:"balance"`
	History *struct {
		At     []int64            `json:"at"`
		Claims map[string][]int64 `json:"claims"`
	} `json:"history"`
	Room *struct {
		Joined        int64 `json:"joined"`
		Waiting       int64 `json:"waiting"`
		Admitted      int64 `json:"admitted"`
		PassesUsed    int64 `json:"passesUsed"`
		PassesExpired int64 `json:"passesExpired"`
		Drawn         bool  `json:"drawn"`
	} `json:"waitingRoom"`
}

func (e *env) board() (saleBoard, int64) {
	e.t.Helper()
	return e.boardAt("/admin/sales.json")
}

func (e *env) boardAt(path string) (saleBoard, int64) {
	e.t.Helper()
	res := e.mustOK(req{method: "GET", path: path, token: e.adminToken()})
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

// saleOnBoard is the voucher's sale as the live sale page reads it.
func (e *env) saleOnBoard(voucher string) saleOut {
	e.t.Helper()
	b, _ := e.board()
	for _, s := range b.Sales {
		if s.ID == voucher {
			return s
		}
	}
	e.t.Fatalf("voucher %s is not on the board: %+v", voucher, b.Sales)
	return saleOut{}
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
	if s.State != "sold_out" || *s.GateStock != 0 || s.DBStock != 3 || s.Orders != 0 || b.Queue != "channel" || b.QueueLength == nil || *b.QueueLength != 3 {
		t.Fatalf("after claims, before fulfilment: queue %s len %v, sale %+v", b.Queue, b.QueueLength, s)
	}

	e.fulfilQueued(3)
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

// TestPageScriptsWriteNoMarkup: the pages' own scripts put server strings
// (a voucher's title, an audit entry, an errorMsg) into the DOM as text
// only: none of them has a way to write markup or run a string as code.
// test/browser proves a title made of markup is shown as text.
func TestPageScriptsWriteNoMarkup(t *testing.T) {
	sinks := []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "createContextualFragment",
		"DOMParser", "srcdoc", "eval(", "new Function", "setTimeout('", `setTimeout("`}
	e := newEnv(t, options{})
	for _, path := range []string{"/admin/assets/sales.js", "/waiting-room/assets/room.js"} {
		w := e.raw(req{method: "GET", path: path})
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, w.Code)
		}
		for _, sink := range sinks {
			if strings.Contains(w.Body.String(), sink) {
				t.Errorf("%s uses %s: server strings must go in as text (textContent)", path, sink)
			}
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

// TestSaleBoardShowsTheOrderLifecycle: the orders by state, the units they
// gave back, and the balance of units between Redis and MySQL, which a gate
// that forgot an order breaks.
func TestSaleBoardShowsTheOrderLifecycle(t *testing.T) {
	e := newEnv(t, options{})
	id := e.addVoucher(1, 5)
	tokens := make([]string, 5)
	orders := make([]string, 4)
	for i := range tokens {
		tokens[i] = e.token(int64(200 + i))
	}
	for i := range orders {
		orders[i] = e.sold(id, tokens[i])
	}
	if res := e.notify(payBody(orders[0], 8000), nil); !res.Success {
		t.Fatalf("pay: %s", res.raw)
	}
	e.mustOK(req{method: "POST", path: "/voucher-order/" + orders[1] + "/cancel", token: tokens[1]})
	e.mustOK(req{method: "POST", path: "/voucher-order/" + orders[2] + "/cancel", token: tokens[2]})
	e.notify(payBody(orders[2], 8000), nil) // paid after its cancel: refunding
	e.claim(id, tokens[4])                  // in flight: in Redis and the queue, not in MySQL

	b, _ := e.board()
	s := b.Sales[0]
	if s.Unpaid != 1 || s.Paid != 1 || s.Cancelled != 1 || s.Refunding != 1 || s.Returned != 2 || s.Orders != 2 ||
		s.DBStock != 3 || s.GateStock == nil || *s.GateStock != 2 || s.State != "live" {
		t.Fatalf("lifecycle figures: %+v", s)
	}
	if bal := s.Balance; bal.Initial != 5 || bal.InFlight != 1 || !bal.Holds || bal.Problem != "" {
		t.Fatalf("balance with one claim in flight: %+v", bal)
	}

	e.fulfilQueued(1)
	n, _ := strconv.ParseInt(orders[3], 10, 64)
	v, _ := strconv.ParseInt(id, 10, 64)
	o, err := domain.NewVoucherOrder(domain.OrderID(n), 203, domain.VoucherID(v))
	if err != nil {
		t.Fatal(err)
	}
	e.gate.Lose(o) // Redis forgets an unpaid order MySQL has
	b, _ = e.board()
	if bal := b.Sales[0].Balance; bal.Initial != 5 || bal.InFlight != -1 || bal.Holds || !strings.Contains(bal.Problem, "1 more units") {
		t.Fatalf("balance with a forgotten order: %+v", bal)
	}
	e.gate.Forget(domain.VoucherID(v))
	if bal := e.mustBoardSale(0).Balance; bal.Holds || !strings.Contains(bal.Problem, "no state") {
		t.Fatalf("balance with no gate: %+v", bal)
	}
}

func (e *env) mustBoardSale(i int) saleOut {
	e.t.Helper()
	b, _ := e.board()
	if len(b.Sales) <= i {
		e.t.Fatalf("the board shows %d sales, want sale %d", len(b.Sales), i)
	}
	return b.Sales[i]
}

// TestSaleBoardPutsSellingSalesFirst: a sale that sold out reads sold_out
// and comes after one still selling, even one that started later.
func TestSaleBoardPutsSellingSalesFirst(t *testing.T) {
	e := newEnv(t, options{})
	gone := e.addVoucherWindow(1, 1, now.Add(-2*time.Hour), now.Add(time.Hour))
	selling := e.addVoucherWindow(2, 5, now.Add(-time.Hour), now.Add(time.Hour))
	soon := e.addVoucherWindow(3, 5, now.Add(time.Hour), now.Add(2*time.Hour))
	e.claim(gone, e.token(300))

	b, _ := e.board()
	var got []string
	for _, s := range b.Sales {
		got = append(got, s.ID+":"+s.State)
	}
	want := []string{selling + ":live", gone + ":sold_out", soon + ":upcoming"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("board order %v, want %v", got, want)
	}
}

// TestSaleBoardServesTheLastMinuteOnRequest: ?history=1 adds the readings
// the instance took, so a page opened mid-sale draws the last minute;
// without it the poll carries none.
func TestSaleBoardServesTheLastMinuteOnRequest(t *testing.T) {
	e := newEnv(t, options{})
	id := e.addVoucher(1, 10)
	for i := 0; i < 3; i++ {
		e.claim(id, e.token(int64(400+i)))
		e.counter.Sample(now.Add(time.Duration(i) * time.Second))
	}
	if b, _ := e.board(); b.Sales[0].History != nil {
		t.Fatal("a plain poll carries the history")
	}
	b, _ := e.boardAt("/admin/sales.json?history=1")
	h := b.Sales[0].History
	if h == nil || len(h.At) != 3 || h.At[0] != now.UnixMilli() || h.At[2] != now.Add(2*time.Second).UnixMilli() {
		t.Fatalf("history: %+v", h)
	}
	if got := h.Claims["success"]; len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("success counts %v, want 1..3", got)
	}
	if _, ok := h.Claims["sold_out"]; ok || len(h.Claims) != 1 {
		t.Fatalf("outcomes never answered are in the history: %v", h.Claims)
	}
}
