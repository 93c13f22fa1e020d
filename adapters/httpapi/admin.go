package httpapi

import (
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// The operator's endpoints behind requireAdmin: a sale's orders (list and
// CSV export), the audit trail, and the sale controls.

// saleOrderDTO is one order of a sale as its operator reads it: the
// status endpoint's fields, the buyer, and the claim's time (the id's).
type saleOrderDTO struct {
	ID          string `json:"id"`
	UserID      string `json:"userId"`
	State       string `json:"state"`
	Reason      string `json:"reason,omitempty"`
	ClaimedAt   string `json:"claimedAt"`
	PayDeadline string `json:"payDeadline,omitempty"`
	PaidAt      string `json:"paidAt,omitempty"`
}

type saleOrdersDTO struct {
	Orders []saleOrderDTO `json:"orders"`
	// Next is the cursor of the next page (its `after`); omitted on the last.
	Next string `json:"next,omitempty"`
}

// csvColumns are the export's columns, the JSON list's fields.
var csvColumns = []string{"id", "userId", "state", "reason", "claimedAt", "payDeadline", "paidAt"}

// exportPageWrite is how long one page of an export may take to reach the
// client: the server's write timeout would cut a large export, so each
// page moves the deadline on, and a client that stops reading is still
// dropped.
const exportPageWrite = 10 * time.Second

func toSaleOrderDTO(st domain.OrderStatus) saleOrderDTO {
	d := saleOrderDTO{
		ID:        strconv.FormatInt(int64(st.Order.ID()), 10),
		UserID:    strconv.FormatInt(int64(st.Order.UserID()), 10),
		State:     string(st.State),
		Reason:    string(st.CancelReason),
		ClaimedAt: st.Order.ID().Time().UTC().Format(time.RFC3339),
	}
	if by := st.PayBy(); !by.IsZero() {
		d.PayDeadline = by.UTC().Format(time.RFC3339)
	}
	if !st.PaidAt.IsZero() {
		d.PaidAt = st.PaidAt.UTC().Format(time.RFC3339)
	}
	return d
}

// query reads a list's optional parameters, each bad one a 400 naming it,
// before anything is read: err is the first, and what is read after it
// does not matter.
type query struct {
	url.Values
	err error
}

// int reads a non-negative int64 parameter (absent: 0).
func (q *query) int(name string) int64 {
	s := q.Get(name)
	n, err := strconv.ParseInt(s, 10, 64)
	if s != "" && (err != nil || n < 0) {
		q.err = cmp.Or(q.err, badRequest(fmt.Sprintf("%s must be an integer from 0 to %d", name, int64(math.MaxInt64))))
	}
	return n
}

// limit reads a page's size: absent it is 0 (the use case's default);
// present, even empty, it must be an integer from 1 to max.
func (q *query) limit(max int) int {
	if !q.Has("limit") {
		return 0
	}
	n, err := strconv.Atoi(q.Get("limit"))
	if err != nil || n < 1 || n > max {
		q.err = cmp.Or(q.err, badRequest(fmt.Sprintf("limit must be an integer from 1 to %d", max)))
	}
	return n
}

// filter reads the orders' state filter (absent: all).
func (q *query) filter() domain.OrderFilter {
	f, err := domain.ParseOrderFilter(q.Get("state"))
	q.err = cmp.Or(q.err, err)
	return f
}

func (a *api) saleOrders(w http.ResponseWriter, r *http.Request, voucher int64) error {
	q := query{Values: r.URL.Query()}
	filter, after, limit := q.filter(), q.int("after"), q.limit(application.MaxOrderPage)
	if q.err != nil {
		return q.err
	}
	page, err := a.Orders.Handle(r.Context(), application.SaleOrdersQuery{
		Voucher: domain.VoucherID(voucher), Filter: filter, After: domain.OrderID(after), Limit: limit,
	})
	if err != nil {
		return err
	}
	out := saleOrdersDTO{Orders: make([]saleOrderDTO, len(page.Orders))}
	for i, st := range page.Orders {
		out.Orders[i] = toSaleOrderDTO(st)
	}
	if page.Next != 0 {
		out.Next = strconv.FormatInt(int64(page.Next), 10)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeOK(w, out)
	return nil
}

// exportSaleOrders streams the CSV a page at a time: it writes each page
// as it is read and keeps none, so its memory does not grow with the sale.
// Until the first page it can still answer an error envelope (bad input,
// an unknown voucher, a database down); after, an error can only cut the
// answer short, which the client sees as a failed download, never as a
// complete file.
func (a *api) exportSaleOrders(w http.ResponseWriter, r *http.Request, id int64) error {
	voucher := domain.VoucherID(id)
	filter, err := domain.ParseOrderFilter(r.URL.Query().Get("state"))
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	cw := csv.NewWriter(w)
	started := false
	row := make([]string, len(csvColumns))
	err = a.Orders.Export(r.Context(), voucher, filter, func(page []domain.OrderStatus) error {
		_ = rc.SetWriteDeadline(time.Now().Add(exportPageWrite)) // unsupported by test recorders only
		if !started {
			started = true
			name := fmt.Sprintf("voucher-%d-orders", voucher)
			if filter != domain.AllOrders {
				name += "-" + string(filter)
			}
			h := w.Header()
			h.Set("Content-Type", "text/csv; charset=utf-8")
			h.Set("Content-Disposition", `attachment; filename="`+name+`.csv"`)
			h.Set("Cache-Control", "no-store")
			h.Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusOK)
			if err := cw.Write(csvColumns); err != nil {
				return err
			}
		}
		for _, st := range page {
			d := toSaleOrderDTO(st)
			row[0], row[1], row[2], row[3], row[4], row[5], row[6] = d.ID, d.UserID, d.State, d.Reason, d.ClaimedAt, d.PayDeadline, d.PaidAt
			for i := range row {
				row[i] = csvCell(row[i])
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
		_ = rc.Flush()
		return nil
	})
	if err == nil || !started {
		return err
	}
	noteError(r, fmt.Errorf("export cut short: %w", err))
	if !errors.Is(err, r.Context().Err()) {
		// Abort the connection: a clean end would pass a partial file off
		// as the whole sale.
		panic(http.ErrAbortHandler)
	}
	return nil
}

// csvCell defuses a cell a spreadsheet would run as a formula (OWASP's
// CSV injection advice): one starting with = + - @, a tab or a carriage
// return gets a leading single quote. Today's columns are ids, states and
// times, none of which can start so; the guard is for any column added.
func csvCell(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

// auditEntryDTO is one admin action: who, when, what, on which voucher,
// and what changed (the JSON object recorded with it).
type auditEntryDTO struct {
	ID        string          `json:"id"`
	At        string          `json:"at"`
	AdminID   string          `json:"adminId"`
	Action    string          `json:"action"`
	VoucherID string          `json:"voucherId"`
	Change    json.RawMessage `json:"change"`
}

type auditPageDTO struct {
	Entries []auditEntryDTO `json:"entries"`
	// Next is the cursor of the next (older) page, its `before`; omitted on
	// the last.
	Next string `json:"next,omitempty"`
}

// auditTrail is read-only: the trail has no route that changes or removes
// an entry (PUT, PATCH and DELETE answer 405).
func (a *api) auditTrail(w http.ResponseWriter, r *http.Request) error {
	q := query{Values: r.URL.Query()}
	before, voucher, limit := q.int("before"), q.int("voucher"), q.limit(application.MaxAuditPage)
	if q.err != nil {
		return q.err
	}
	page, err := a.Audit.Handle(r.Context(), ports.AuditQuery{Before: before, Voucher: domain.VoucherID(voucher), Limit: limit})
	if err != nil {
		return err
	}
	out := auditPageDTO{Entries: make([]auditEntryDTO, len(page.Entries))}
	for i, e := range page.Entries {
		change := json.RawMessage(e.Change())
		if !json.Valid(change) {
			// Only a row written by hand can hold this; show it, as text.
			change, _ = json.Marshal(e.Change())
		}
		out.Entries[i] = auditEntryDTO{
			ID: strconv.FormatInt(e.ID(), 10), At: e.At().UTC().Format(time.RFC3339Nano),
			AdminID: strconv.FormatInt(int64(e.Admin()), 10), Action: string(e.Action()),
			VoucherID: strconv.FormatInt(int64(e.Voucher()), 10), Change: change,
		}
	}
	if page.Next != 0 {
		out.Next = strconv.FormatInt(page.Next, 10)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeOK(w, out)
	return nil
}

// saleStateDTO is a sale as a control leaves it: what an admin checks
// after changing it.
type saleStateDTO struct {
	ID        string `json:"id"`
	Stock     int    `json:"stock"`
	BeginTime string `json:"beginTime"`
	EndTime   string `json:"endTime"`
	Paused    bool   `json:"paused"`
	// Added is every unit admins added since the sale was created.
	Added int `json:"added"`
}

// control is the endpoint of a sale control: the voucher the path names,
// changed by do on behalf of the admin making the request, answered as it
// is left. POST /admin/vouchers/{id}/end, .../pause and .../resume are
// application.ControlSale's EndNow, Pause and Resume alone.
func (a *api) control(
	do func(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error),
) func(http.ResponseWriter, *http.Request, int64) error {
	return func(w http.ResponseWriter, r *http.Request, id int64) error {
		v, err := do(r.Context(), userFrom(r.Context()), domain.VoucherID(id))
		if err != nil {
			return err
		}
		// The shop's list shows the new stock and end here at once.
		a.lists.forget(strconv.FormatInt(int64(v.ShopID()), 10))
		s := v.Sale()
		writeOK(w, saleStateDTO{ID: strconv.FormatInt(int64(v.ID()), 10), Stock: s.Stock(),
			BeginTime: s.Begin().UTC().Format(time.RFC3339Nano), EndTime: s.End().UTC().Format(time.RFC3339Nano),
			Paused: s.Paused(), Added: s.Added()})
		return nil
	}
}

// moveSaleEnd: PUT /admin/vouchers/{id}/end-time {"endTime": RFC 3339}.
func (a *api) moveSaleEnd(w http.ResponseWriter, r *http.Request, id int64) error {
	var req struct {
		EndTime string `json:"endTime"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	end, err := a.parseTime("endTime", req.EndTime)
	if err != nil {
		return err
	}
	return a.control(func(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error) {
		return a.Controls.MoveEnd(ctx, admin, id, end)
	})(w, r, id)
}

// addSaleStock: POST /admin/vouchers/{id}/stock {"add": n}.
func (a *api) addSaleStock(w http.ResponseWriter, r *http.Request, id int64) error {
	var req struct {
		Add *int `json:"add"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.Add == nil {
		return &domain.ValidationError{Field: "add", Reason: "is required"}
	}
	// An admin's retry after a timeout or a 500 carries the same key and
	// adds nothing more.
	return a.control(func(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error) {
		return a.Controls.AddStock(ctx, admin, id, *req.Add, r.Header.Get(idempotencyKeyHeader))
	})(w, r, id)
}
