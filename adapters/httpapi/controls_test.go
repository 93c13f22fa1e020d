package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

type saleStateOut struct {
	ID        string `json:"id"`
	Stock     int    `json:"stock"`
	BeginTime string `json:"beginTime"`
	EndTime   string `json:"endTime"`
	Paused    bool   `json:"paused"`
	Added     int    `json:"added"`
}

// auditOf is the trail of one voucher, newest first.
func (e *env) auditOf(voucher string) []domain.AuditEntry {
	e.t.Helper()
	id, _ := strconv.ParseInt(voucher, 10, 64)
	got, err := memory.NewAuditLog(e.stored).List(context.Background(), ports.AuditQuery{Voucher: domain.VoucherID(id), Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// TestSaleControlsAreForAdminsOnly: every sale control answers
// a missing token 401 and another user 403, and changes nothing.
func TestSaleControlsAreForAdminsOnly(t *testing.T) {
	e := newEnv(t, options{})
	voucher := e.addVoucher(1, 3)
	for _, r := range []req{
		{method: "POST", path: "/admin/vouchers/" + voucher + "/end"},
		{method: "PUT", path: "/admin/vouchers/" + voucher + "/end-time", body: `{"endTime":"2026-11-29T23:00:00+08:00"}`},
		{method: "POST", path: "/admin/vouchers/" + voucher + "/stock", body: `{"add":5}`},
		{method: "POST", path: "/admin/vouchers/" + voucher + "/pause"},
		{method: "POST", path: "/admin/vouchers/" + voucher + "/resume"},
	} {
		t.Run(r.method+"_"+r.path, func(t *testing.T) {
			wantRefusal(t, e.do(r), http.StatusUnauthorized, "unauthorized", "")
			r.token = e.token(42)
			wantRefusal(t, e.do(r), http.StatusForbidden, "forbidden", "")
		})
	}
	if got := len(e.auditOf(voucher)); got != 1 {
		t.Fatalf("%d audit entries, want only the creation's", got)
	}
	if res := e.claim(voucher, e.token(7)); !res.Success {
		t.Fatalf("a refused control ended the sale: %s", res.raw)
	}
}

// TestEndSaleNow: the claims after it answer ended; ending it again
// answers the same sale and records no second entry.
func TestEndSaleNow(t *testing.T) {
	e := newEnv(t, options{})
	voucher := e.addVoucher(1, 3)
	path := "/admin/vouchers/" + voucher + "/end"
	first := decodeData[saleStateOut](t, e.mustOK(req{method: "POST", path: path, token: e.adminToken()}))
	if end, err := time.Parse(time.RFC3339Nano, first.EndTime); err != nil || !end.Equal(now) {
		t.Fatalf("endTime %q, want now %s (%v)", first.EndTime, now.UTC(), err)
	}
	wantRefusal(t, e.claim(voucher, e.token(7)), http.StatusOK, "ended", "")
	again := decodeData[saleStateOut](t, e.mustOK(req{method: "POST", path: path, token: e.adminToken()}))
	if again != first {
		t.Fatalf("ending again answered %+v, first %+v", again, first)
	}
	trail := e.auditOf(voucher)
	if len(trail) != 2 || trail[0].Action() != domain.ActionEndSale || trail[0].Admin() != adminUser {
		t.Fatalf("audit trail %+v, want the creation and one sale.end by the admin", trail)
	}
}

// TestMoveSaleEnd: an end moved later or earlier holds; one the sale's
// state refuses answers 409 with its code, bad input 400, and neither
// changes anything.
func TestMoveSaleEnd(t *testing.T) {
	e := newEnv(t, options{})
	voucher := e.addVoucher(1, 3)
	path := "/admin/vouchers/" + voucher + "/end-time"
	move := func(body string) result {
		return e.do(req{method: "PUT", path: path, token: e.adminToken(), body: body})
	}
	at := func(d time.Duration) string { return `{"endTime":"` + now.Add(d).Format(time.RFC3339) + `"}` }

	later := decodeData[saleStateOut](t, e.mustOK(req{method: "PUT", path: path, token: e.adminToken(), body: at(3 * time.Hour)}))
	if end, _ := time.Parse(time.RFC3339Nano, later.EndTime); !end.Equal(now.Add(3 * time.Hour)) {
		t.Fatalf("endTime %s, want %s", later.EndTime, now.Add(3*time.Hour).UTC())
	}
	e.mustOK(req{method: "PUT", path: path, token: e.adminToken(), body: at(time.Minute)})
	if res := e.claim(voucher, e.token(7)); !res.Success {
		t.Fatalf("claim before the moved end: %s", res.raw)
	}

	for _, c := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"in_the_past", at(-time.Minute), http.StatusConflict, "end_in_past"},
		{"before_begin", at(-2 * time.Hour), http.StatusConflict, "end_before_begin"},
		{"missing", `{}`, http.StatusBadRequest, "bad_request"},
		{"not_a_time", `{"endTime":"tomorrow"}`, http.StatusBadRequest, "bad_request"},
		{"unknown_field", `{"endTime":"2026-11-29T23:00:00+08:00","stock":5}`, http.StatusBadRequest, "bad_request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantRefusal(t, move(c.body), c.status, c.code, "")
		})
	}
	wantRefusal(t, e.do(req{method: "PUT", path: "/admin/vouchers/999/end-time", token: e.adminToken(), body: at(time.Hour)}),
		http.StatusOK, "not_found", "")
	if got := len(e.auditOf(voucher)); got != 3 {
		t.Fatalf("%d audit entries, want the creation and two moves", got)
	}

	e.mustOK(req{method: "POST", path: "/admin/vouchers/" + voucher + "/end", token: e.adminToken()})
	wantRefusal(t, move(at(time.Hour)), http.StatusConflict, "sale_over", "")
}

// TestPauseAndResumeSale: a paused sale's claims answer paused (in the
// client's language) until it is resumed; both are idempotent and audited
// once each.
func TestPauseAndResumeSale(t *testing.T) {
	e := newEnv(t, options{})
	voucher := e.addVoucher(1, 3)
	base := "/admin/vouchers/" + voucher
	for range 2 {
		st := decodeData[saleStateOut](t, e.mustOK(req{method: "POST", path: base + "/pause", token: e.adminToken()}))
		if !st.Paused {
			t.Fatalf("pause answered %+v", st)
		}
	}
	if s := e.saleOnBoard(voucher); !s.Paused {
		t.Fatalf("the live sale page's data shows the paused sale as %+v", s)
	}
	buyer := e.token(7)
	wantRefusal(t, e.claim(voucher, buyer), http.StatusOK, "paused", "秒杀已暂停，请稍后再试")
	en := e.do(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: buyer, header: map[string]string{"Accept-Language": "en"}})
	wantRefusal(t, en, http.StatusOK, "paused", "The sale is paused; try again later")
	for range 2 {
		st := decodeData[saleStateOut](t, e.mustOK(req{method: "POST", path: base + "/resume", token: e.adminToken()}))
		if st.Paused || st.Stock != 3 {
			t.Fatalf("resume answered %+v", st)
		}
	}
	if s := e.saleOnBoard(voucher); s.Paused {
		t.Fatalf("the live sale page's data shows the resumed sale as %+v", s)
	}
	if res := e.claim(voucher, buyer); !res.Success {
		t.Fatalf("claim after resume: %s", res.raw)
	}
	trail := e.auditOf(voucher)
	if len(trail) != 3 || trail[0].Action() != domain.ActionResume || trail[1].Action() != domain.ActionPause {
		t.Fatalf("audit trail %v, want creation, one pause, one resume", trail)
	}
}

// TestAddSaleStock: added units are sold, in the database and the gate;
// bad amounts answer 400 and change nothing; an ended sale takes none.
func TestAddSaleStock(t *testing.T) {
	e := newEnv(t, options{})
	voucher := e.addVoucher(1, 1)
	path := "/admin/vouchers/" + voucher + "/stock"
	if res := e.claim(voucher, e.token(1)); !res.Success {
		t.Fatal(res.raw)
	}
	wantRefusal(t, e.claim(voucher, e.token(2)), http.StatusOK, "sold_out", "")
	st := decodeData[saleStateOut](t, e.mustOK(req{method: "POST", path: path, token: e.adminToken(), body: `{"add":2}`}))
	if st.Added != 2 {
		t.Fatalf("answer %+v, want added 2", st)
	}
	if s := e.saleOnBoard(voucher); s.Added != 2 {
		t.Fatalf("the live sale page's data shows %+v, want 2 added", s)
	}
	if got := e.gateStock(voucher); got != 2 {
		t.Fatalf("gate stock %d, want the 2 added", got)
	}
	for u := int64(2); u <= 3; u++ {
		if res := e.claim(voucher, e.token(u)); !res.Success {
			t.Fatalf("claim of an added unit: %s", res.raw)
		}
	}
	wantRefusal(t, e.claim(voucher, e.token(4)), http.StatusOK, "sold_out", "")
	for _, body := range []string{`{}`, `{"add":0}`, `{"add":-3}`, `{"add":1.5}`, `{"add":"2"}`, `{"add":2000000000}`} {
		wantRefusal(t, e.do(req{method: "POST", path: path, token: e.adminToken(), body: body}), http.StatusBadRequest, "bad_request", "")
	}
	if got := e.gateStock(voucher); got != 0 {
		t.Fatalf("gate stock %d after refused additions, want 0", got)
	}
	e.mustOK(req{method: "POST", path: "/admin/vouchers/" + voucher + "/end", token: e.adminToken()})
	wantRefusal(t, e.do(req{method: "POST", path: path, token: e.adminToken(), body: `{"add":1}`}), http.StatusConflict, "sale_over", "")
}

// TestAddSaleStockRetriedUnderItsKey: a retry with the addition's
// Idempotency-Key adds nothing more and records no second entry; the key
// reused for another amount is a 400.
func TestAddSaleStockRetriedUnderItsKey(t *testing.T) {
	e := newEnv(t, options{})
	voucher := e.addVoucher(1, 1)
	path := "/admin/vouchers/" + voucher + "/stock"
	key := map[string]string{"Idempotency-Key": "add-3-once"}
	for range 3 {
		st := decodeData[saleStateOut](t, e.mustOK(req{method: "POST", path: path, token: e.adminToken(), body: `{"add":3}`, header: key}))
		if st.Stock != 4 || st.Added != 3 {
			t.Fatalf("answer %+v, want stock 4, added 3", st)
		}
	}
	if got := e.gateStock(voucher); got != 4 {
		t.Fatalf("gate stock %d, want 4", got)
	}
	wantRefusal(t, e.do(req{method: "POST", path: path, token: e.adminToken(), body: `{"add":5}`, header: key}), http.StatusBadRequest, "bad_request", "")
	if got := len(e.auditOf(voucher)); got != 2 {
		t.Fatalf("%d audit entries, want the creation and one addition", got)
	}
}
