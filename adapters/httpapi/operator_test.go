package httpapi_test

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hmdp-go/seckill/domain"
)

type saleOrdersOut struct {
	Orders []struct {
		ID, UserID, State, Reason, ClaimedAt, PayDeadline, PaidAt string
	} `json:"orders"`
	Next string `json:"next"`
}

type auditOut struct {
	Entries []struct {
		ID, At, AdminID, Action, VoucherID string
		Change                             map[string]any
	} `json:"entries"`
	Next string `json:"next"`
}

func decodeData[T any](t *testing.T, res result) T {
	t.Helper()
	var out T
	if err := json.Unmarshal(res.Data, &out); err != nil {
		t.Fatalf("data: %v: %s", err, res.raw)
	}
	return out
}

// saleWithOrders creates a sale and n unpaid orders of users 1..n, written
// to the database, in id order.
func (e *env) saleWithOrders(n int) (voucher string, orders []string) {
	e.t.Helper()
	voucher = e.addVoucher(1, n)
	for u := 1; u <= n; u++ {
		orders = append(orders, e.claim(voucher, e.token(int64(u))).dataString(e.t))
	}
	e.fulfilQueued(n)
	return voucher, orders
}

// TestOperatorEndpointsAreForAdminsOnly: the order list, the export and
// the audit trail answer a missing token 401 and another user 403, as
// voucher creation does, and read nothing for either.
func TestOperatorEndpointsAreForAdminsOnly(t *testing.T) {
	e := newEnv(t, options{})
	voucher, _ := e.saleWithOrders(2)
	forbidden := e.do(req{method: "POST", path: "/voucher/seckill", token: e.token(42), body: validVoucher(nil)})
	for _, path := range []string{"/admin/vouchers/" + voucher + "/orders", "/admin/vouchers/" + voucher + "/orders.csv", "/admin/audit"} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			before := e.calls.snapshot()
			wantRefusal(t, e.do(req{method: "GET", path: path}), http.StatusUnauthorized, "unauthorized", "")
			res := e.do(req{method: "GET", path: path, token: e.token(42)})
			wantRefusal(t, res, http.StatusForbidden, "forbidden", "")
			if res.raw != forbidden.raw {
				t.Fatalf("403 %s differs from voucher creation's %s", res.raw, forbidden.raw)
			}
			if after := e.calls.snapshot(); !equalCounts(before, after) {
				t.Fatalf("a refused request reached the ports: %v -> %v", before, after)
			}
			e.mustOK200(path)
		})
	}
}

// mustOK200 is a GET as the admin that must answer 200.
func (e *env) mustOK200(path string) *http.Response {
	e.t.Helper()
	w := e.raw(req{method: "GET", path: path, token: e.adminToken()})
	if w.Code != http.StatusOK {
		e.t.Fatalf("GET %s as admin: %d %s", path, w.Code, w.Body.String())
	}
	return w.Result()
}

// TestSaleOrdersListedByStateInPages: the list follows its cursor, filters
// by the operator's states and answers the fields of each order.
func TestSaleOrdersListedByStateInPages(t *testing.T) {
	e := newEnv(t, options{})
	voucher, orders := e.saleWithOrders(5)
	// Order 0 paid, order 1 cancelled by its buyer.
	if res := e.notify(`{"orderId":"`+orders[0]+`","amount":8000,"transactionId":"tx-1"}`, nil); !res.Success {
		t.Fatalf("pay: %s", res.raw)
	}
	e.mustOK(req{method: "POST", path: "/voucher-order/" + orders[1] + "/cancel", token: e.token(2)})
	admin := e.adminToken()
	base := "/admin/vouchers/" + voucher + "/orders"

	var walked []string
	path := base + "?limit=2"
	for pages := 1; ; pages++ {
		page := decodeData[saleOrdersOut](t, e.mustOK(req{method: "GET", path: path, token: admin}))
		if len(page.Orders) > 2 || pages > 3 {
			t.Fatalf("page %d: %d orders", pages, len(page.Orders))
		}
		for _, o := range page.Orders {
			walked = append(walked, o.ID)
		}
		if page.Next == "" {
			break
		}
		path = base + "?limit=2&after=" + page.Next
	}
	if strings.Join(walked, ",") != strings.Join(orders, ",") {
		t.Fatalf("walked %v, want %v (every order, in id order)", walked, orders)
	}

	for state, want := range map[string][]string{
		"unpaid": orders[2:], "paid": orders[:1], "cancelled": orders[1:2], "expired": nil, "refunding": nil,
	} {
		page := decodeData[saleOrdersOut](t, e.mustOK(req{method: "GET", path: base + "?state=" + state, token: admin}))
		var got []string
		for _, o := range page.Orders {
			got = append(got, o.ID)
			if o.UserID == "" || o.ClaimedAt == "" {
				t.Fatalf("state %s: order %+v lacks its user or claim time", state, o)
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") || page.Next != "" {
			t.Fatalf("state %s: %v (next %q), want %v", state, got, page.Next, want)
		}
		switch o := page.Orders; state {
		case "paid":
			if o[0].State != "paid" || o[0].PaidAt == "" || o[0].UserID != "1" {
				t.Fatalf("paid order: %+v", o[0])
			}
		case "cancelled":
			if o[0].State != "cancelled" || o[0].Reason != "cancelled" {
				t.Fatalf("cancelled order: %+v", o[0])
			}
		case "unpaid":
			if o[0].State != "created" || o[0].PayDeadline == "" {
				t.Fatalf("unpaid order: %+v", o[0])
			}
		}
	}

	res := e.do(req{method: "GET", path: "/admin/vouchers/999/orders", token: admin})
	wantRefusal(t, res, http.StatusOK, "not_found", "")
}

// TestSaleOrdersExportedAsCSV: the export is the list's rows under a header,
// as a download, and a sale without orders is a header alone.
func TestSaleOrdersExportedAsCSV(t *testing.T) {
	e := newEnv(t, options{})
	voucher, orders := e.saleWithOrders(3)
	resp := e.mustOK200("/admin/vouchers/" + voucher + "/orders.csv")
	if ct := resp.Header.Get("Content-Type"); ct != "text/csv; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename="voucher-`+voucher+`-orders.csv"` {
		t.Fatalf("Content-Disposition %q", cd)
	}
	rows, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || strings.Join(rows[0], ",") != "id,userId,state,reason,claimedAt,payDeadline,paidAt" {
		t.Fatalf("rows: %q", rows)
	}
	for i, row := range rows[1:] {
		if row[0] != orders[i] || row[2] != "created" || row[5] == "" {
			t.Fatalf("row %d: %q, want order %s unpaid with its deadline", i+1, row, orders[i])
		}
	}
	rows, err = csv.NewReader(e.mustOK200("/admin/vouchers/" + voucher + "/orders.csv?state=refunding").Body).ReadAll()
	if err != nil || len(rows) != 1 {
		t.Fatalf("no refunding orders: %q, %v; want the header alone", rows, err)
	}
	wantRefusal(t, e.do(req{method: "GET", path: "/admin/vouchers/999/orders.csv", token: e.adminToken()}), http.StatusOK, "not_found", "")
}

// TestOperatorReadsRefuseBadInput: an unknown state, a limit out of range,
// a cursor that is not a non-negative id: 400 naming the parameter, before
// anything is read.
func TestOperatorReadsRefuseBadInput(t *testing.T) {
	e := newEnv(t, options{})
	voucher, _ := e.saleWithOrders(1)
	list, export := "/admin/vouchers/"+voucher+"/orders", "/admin/vouchers/"+voucher+"/orders.csv"
	cases := []struct{ name, path, names string }{
		{"unknown_state", list + "?state=shipped", "state"},
		{"unknown_state_export", export + "?state=DROP", "state"},
		{"state_in_api_words", list + "?state=created", "state"},
		{"limit_zero", list + "?limit=0", "limit"},
		{"limit_huge", list + "?limit=1000000", "limit"},
		{"limit_negative", list + "?limit=-1", "limit"},
		{"limit_text", list + "?limit=ten", "limit"},
		{"cursor_negative", list + "?after=-1", "after"},
		{"cursor_text", list + "?after=abc", "after"},
		{"cursor_overflow", list + "?after=99999999999999999999", "after"},
		{"voucher_not_a_number", "/admin/vouchers/x1/orders", "id"},
		{"voucher_zero_export", "/admin/vouchers/0/orders.csv", "id"},
		{"audit_limit_huge", "/admin/audit?limit=501", "limit"},
		{"audit_limit_zero", "/admin/audit?limit=0", "limit"},
		{"audit_cursor_negative", "/admin/audit?before=-5", "before"},
		{"audit_voucher_text", "/admin/audit?voucher=one", "voucher"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.calls.snapshot()
			res := e.do(req{method: "GET", path: tc.path, token: e.adminToken()})
			wantRefusal(t, res, http.StatusBadRequest, "bad_request", "")
			if !strings.Contains(res.ErrorMsg, tc.names) {
				t.Fatalf("errorMsg %q does not name %s", res.ErrorMsg, tc.names)
			}
			if after := e.calls.snapshot(); !equalCounts(before, after) {
				t.Fatalf("bad input reached the ports: %v -> %v", before, after)
			}
		})
	}
}

// TestAuditTrailRecordsEachCreationOnce: a creation is in the trail with
// its admin and fields; its retry under the same Idempotency-Key adds
// nothing; the trail cannot be changed through the API.
func TestAuditTrailRecordsEachCreationOnce(t *testing.T) {
	e := newEnv(t, options{})
	admin := e.adminToken()
	create := req{method: "POST", path: "/voucher/seckill", token: admin, body: validVoucher(nil),
		header: map[string]string{"Idempotency-Key": "audit-1"}}
	first := e.mustOK(create).dataString(t)
	if again := e.mustOK(create).dataString(t); again != first {
		t.Fatalf("retry created voucher %s, first %s", again, first)
	}
	second := e.addVoucher(2, 3)

	page := decodeData[auditOut](t, e.mustOK(req{method: "GET", path: "/admin/audit", token: admin}))
	if len(page.Entries) != 2 || page.Next != "" {
		t.Fatalf("%d entries (next %q), want 2: one per voucher created", len(page.Entries), page.Next)
	}
	newest, oldest := page.Entries[0], page.Entries[1]
	if newest.VoucherID != second || oldest.VoucherID != first {
		t.Fatalf("entries name vouchers %s, %s; want %s, %s (newest first)", newest.VoucherID, oldest.VoucherID, second, first)
	}
	if oldest.AdminID != "900001" || oldest.Action != string(domain.ActionCreateVoucher) || oldest.At == "" ||
		oldest.Change["title"] != "t" || oldest.Change["stock"] != float64(10) || oldest.Change["idempotencyKey"] != "audit-1" {
		t.Fatalf("entry: %+v", oldest)
	}

	one := decodeData[auditOut](t, e.mustOK(req{method: "GET", path: "/admin/audit?limit=1", token: admin}))
	if len(one.Entries) != 1 || one.Next != newest.ID {
		t.Fatalf("page of 1: %+v", one)
	}
	rest := decodeData[auditOut](t, e.mustOK(req{method: "GET", path: "/admin/audit?limit=1&before=" + one.Next, token: admin}))
	if len(rest.Entries) != 1 || rest.Entries[0].ID != oldest.ID || rest.Next != "" {
		t.Fatalf("second page: %+v", rest)
	}
	byVoucher := decodeData[auditOut](t, e.mustOK(req{method: "GET", path: "/admin/audit?voucher=" + first, token: admin}))
	if len(byVoucher.Entries) != 1 || byVoucher.Entries[0].VoucherID != first {
		t.Fatalf("voucher %s's trail: %+v", first, byVoucher)
	}

	for _, method := range []string{"PUT", "PATCH", "DELETE", "POST"} {
		res := e.do(req{method: method, path: "/admin/audit", token: admin, body: `{}`})
		if res.status != http.StatusMethodNotAllowed || res.Success {
			t.Fatalf("%s /admin/audit: %d %s, want 405", method, res.status, res.raw)
		}
	}
	if again := decodeData[auditOut](t, e.mustOK(req{method: "GET", path: "/admin/audit", token: admin})); len(again.Entries) != 2 {
		t.Fatalf("the trail changed: %d entries", len(again.Entries))
	}
}
