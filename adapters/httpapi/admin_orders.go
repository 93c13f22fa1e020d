package httpapi

import (
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
)

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

// saleOrdersQuery reads the list's parameters; each bad one is a 400 naming
// it, before anything is read.
func saleOrdersQuery(r *http.Request) (domain.VoucherID, domain.OrderFilter, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return 0, "", err
	}
	filter, err := domain.ParseOrderFilter(r.URL.Query().Get("state"))
	if err != nil {
		return 0, "", err
	}
	return domain.VoucherID(id), filter, nil
}

// queryInt reads an optional non-negative int64 parameter (absent: 0).
func queryInt(r *http.Request, name string) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest(fmt.Sprintf("%s must be an integer from 0 to %d", name, int64(math.MaxInt64)))
	}
	return n, nil
}

// queryLimit reads a page's optional size: absent it is 0 (the use case's
// default); present, even empty, it must be an integer from 1 to max.
func queryLimit(r *http.Request, max int) (int, error) {
	q := r.URL.Query()
	if !q.Has("limit") {
		return 0, nil
	}
	n, err := strconv.Atoi(q.Get("limit"))
	if err != nil || n < 1 || n > max {
		return 0, badRequest(fmt.Sprintf("limit must be an integer from 1 to %d", max))
	}
	return n, nil
}

func (a *api) saleOrders(w http.ResponseWriter, r *http.Request) {
	voucher, filter, err := saleOrdersQuery(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	after, err := queryInt(r, "after")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	limit, err := queryLimit(r, application.MaxOrderPage)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page, err := a.Orders.Handle(r.Context(), application.SaleOrdersQuery{
		Voucher: voucher, Filter: filter, After: domain.OrderID(after), Limit: limit,
	})
	if err != nil {
		a.fail(w, r, err)
		return
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
}

// exportSaleOrders streams the CSV a page at a time: it writes each page
// as it is read and keeps none, so its memory does not grow with the sale.
// Until the first page it can still answer an error envelope (bad input,
// an unknown voucher, a database down); after, an error can only cut the
// answer short, which the client sees as a failed download, never as a
// complete file.
func (a *api) exportSaleOrders(w http.ResponseWriter, r *http.Request) {
	voucher, filter, err := saleOrdersQuery(r)
	if err != nil {
		a.fail(w, r, err)
		return
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
	if err == nil {
		return
	}
	if !started {
		a.fail(w, r, err)
		return
	}
	noteError(r, fmt.Errorf("export cut short: %w", err))
	if !errors.Is(err, r.Context().Err()) {
		// Abort the connection: a clean end would pass a partial file off
		// as the whole sale.
		panic(http.ErrAbortHandler)
	}
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
