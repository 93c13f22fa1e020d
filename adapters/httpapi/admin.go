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
	"strings"
	"time"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

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
	Next   domain.OrderID `json:"next,omitempty,string"` // the next page's `after`
}

var csvColumns = []string{"id", "userId", "state", "reason", "claimedAt", "payDeadline", "paidAt"}

func toSaleOrderDTO(st domain.OrderStatus) saleOrderDTO {
	d := saleOrderDTO{
		ID: strconv.FormatInt(int64(st.Order.ID()), 10), UserID: strconv.FormatInt(int64(st.Order.UserID()), 10),
		State: string(st.State), Reason: string(st.CancelReason),
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

// query reads a list's optional parameters; err is the first bad one's 400.
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

// limit reads a page's size: absent, 0 (the default); else 1 to max.
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
	out := saleOrdersDTO{Orders: make([]saleOrderDTO, len(page.Orders)), Next: page.Next}
	for i, st := range page.Orders {
		out.Orders[i] = toSaleOrderDTO(st)
	}
	writeNoStore(w, envelope{Success: true, Data: out})
	return nil
}

// writeNoStore answers a read no cache may keep: an admin's view of live data.
func writeNoStore(w http.ResponseWriter, env envelope) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, env)
}

// exportSaleOrders streams the CSV a page at a time; an error before the first is an envelope, after it a cut.
func (a *api) exportSaleOrders(w http.ResponseWriter, r *http.Request, id int64) error {
	filter, err := domain.ParseOrderFilter(r.URL.Query().Get("state"))
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	cw := csv.NewWriter(w)
	started := false
	row := make([]string, len(csvColumns))
	err = a.Orders.Export(r.Context(), domain.VoucherID(id), filter, func(page []domain.OrderStatus) error {
		// Each page gets its own write deadline: the server's would cut the download.
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if !started {
			started = true
			name := fmt.Sprintf("voucher-%d-orders", id)
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
			for i, v := range [...]string{d.ID, d.UserID, d.State, d.Reason, d.ClaimedAt, d.PayDeadline, d.PaidAt} {
				row[i] = csvCell(v)
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
		// A clean end would pass a partial file off as the whole sale.
		panic(http.ErrAbortHandler)
	}
	return nil
}

// csvCell defuses a cell a spreadsheet would run as a formula (OWASP CSV injection).
func csvCell(s string) string {
	if s != "" && strings.IndexByte("=+-@\t\r", s[0]) >= 0 {
		return "'" + s
	}
	return s
}

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
	Next    int64           `json:"next,omitempty,string"` // the older page's `before`
}

// auditTrail is read-only: no route changes or removes an entry.
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
	out := auditPageDTO{Entries: make([]auditEntryDTO, len(page.Entries)), Next: page.Next}
	for i, e := range page.Entries {
		change := json.RawMessage(e.Change())
		if !json.Valid(change) { // a row written by hand: shown as text
			change, _ = json.Marshal(e.Change())
		}
		out.Entries[i] = auditEntryDTO{
			ID: strconv.FormatInt(e.ID(), 10), At: e.At().UTC().Format(time.RFC3339Nano),
			AdminID: strconv.FormatInt(int64(e.Admin()), 10), Action: string(e.Action()),
			VoucherID: strconv.FormatInt(int64(e.Voucher()), 10), Change: change,
		}
	}
	writeNoStore(w, envelope{Success: true, Data: out})
	return nil
}

// saleStateDTO is a sale as a control leaves it.
type saleStateDTO struct {
	ID        string `json:"id"`
	Stock     int    `json:"stock"`
	BeginTime string `json:"beginTime"`
	EndTime   string `json:"endTime"`
	Paused    bool   `json:"paused"`
	Added     int    `json:"added"` // every unit admins added since creation
}

// control is a sale control's endpoint: do changes the path's voucher as the admin.
func (a *api) control(
	do func(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error),
) func(http.ResponseWriter, *http.Request, int64) error {
	return func(w http.ResponseWriter, r *http.Request, id int64) error {
		v, err := do(r.Context(), userFrom(r.Context()), domain.VoucherID(id))
		if err != nil {
			return err
		}
		a.lists.forget(strconv.FormatInt(int64(v.ShopID()), 10))
		s := v.Sale()
		writeOK(w, saleStateDTO{ID: strconv.FormatInt(int64(v.ID()), 10), Stock: s.Stock(),
			BeginTime: s.Begin().UTC().Format(time.RFC3339Nano), EndTime: s.End().UTC().Format(time.RFC3339Nano),
			Paused: s.Paused(), Added: s.Added()})
		return nil
	}
}

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
	// An admin's retry carries the same key and adds nothing more.
	return a.control(func(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error) {
		return a.Controls.AddStock(ctx, admin, id, *req.Add, r.Header.Get(idempotencyKeyHeader))
	})(w, r, id)
}

// saleBoardDTO: the page derives rates from two readings' counts and At.
type saleBoardDTO struct {
	At          string    `json:"at"`
	Queue       string    `json:"queue"`
	Sales       []saleDTO `json:"sales"`
	QueueLength *int64    `json:"queueLength,omitempty"`
	DeadLetters *int64    `json:"deadLetters,omitempty"`
}

// saleDTO is one sale on the live page: Orders hold a unit (unpaid + paid), Returned gave it back.
type saleDTO struct {
	ID        string           `json:"id"`
	Title     string           `json:"title"`
	State     string           `json:"state"` // live, sold_out or upcoming
	BeginTime string           `json:"beginTime"`
	EndTime   string           `json:"endTime"`
	Paused    bool             `json:"paused"`
	Added     int              `json:"added"`
	GateStock *int             `json:"gateStock,omitempty"` // nil: the gate holds no state
	DBStock   int              `json:"dbStock"`
	Orders    int64            `json:"orders"`
	Failed    int64            `json:"failed"`
	Unpaid    int64            `json:"unpaid"`
	Paid      int64            `json:"paid"`
	Cancelled int64            `json:"cancelled"`
	Refunding int64            `json:"refunding"`
	Returned  int64            `json:"returned"`
	Balance   balanceDTO       `json:"balance"`
	Claims    map[string]int64 `json:"claims"`
	Backlog   *backlogDTO      `json:"backlog,omitempty"` // nil: no per-voucher figures
	History   *historyDTO      `json:"history,omitempty"` // ?history=1
	Room      *roomBoardDTO    `json:"waitingRoom,omitempty"`
}

// roomBoardDTO is a waiting room as last read (at most 250 ms ago).
type roomBoardDTO struct {
	Joined        int64 `json:"joined"`
	Waiting       int64 `json:"waiting"`
	Admitted      int64 `json:"admitted"`
	PassesUsed    int64 `json:"passesUsed"`
	PassesExpired int64 `json:"passesExpired"`
	Drawn         bool  `json:"drawn"`
}

// balanceDTO is application.SaleBalance with its JSON names.
type balanceDTO struct {
	Initial  int    `json:"initial"`
	InFlight int    `json:"inFlight"`
	Holds    bool   `json:"holds"`
	Problem  string `json:"problem,omitempty"`
}

// historyDTO is the last minute's claim counts: claims[outcome][i] was the count at at[i] (Unix ms).
type historyDTO struct {
	At     []int64            `json:"at"`
	Claims map[string][]int64 `json:"claims"`
}

type backlogDTO struct {
	Length  int64 `json:"length"`
	Pending int64 `json:"pending"`
	LagMs   int64 `json:"lagMs"`
}

func (a *api) salesBoard(w http.ResponseWriter, r *http.Request) error {
	// A stalled backend must not pile up polls.
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	b, err := a.Sales.Handle(ctx, application.SaleBoardQuery{History: r.URL.Query().Get("history") == "1"})
	if err != nil {
		return err
	}
	out := saleBoardDTO{At: b.At.UTC().Format(time.RFC3339Nano), Queue: b.Queue.Kind, Sales: make([]saleDTO, 0, len(b.Sales))}
	if b.Queue.Length >= 0 {
		out.QueueLength = &b.Queue.Length
	}
	if b.Queue.DeadLetters >= 0 {
		out.DeadLetters = &b.Queue.DeadLetters
	}
	for _, s := range b.Sales {
		out.Sales = append(out.Sales, a.saleDTO(s))
	}
	writeNoStore(w, envelope{Success: true, Data: out, Total: int64(b.Total)})
	return nil
}

func (a *api) saleDTO(s application.SaleRow) saleDTO {
	v := s.Voucher
	d := saleDTO{
		ID: strconv.FormatInt(int64(v.ID()), 10), Title: v.Title(), State: string(s.State),
		BeginTime: v.Sale().Begin().In(a.Location).Format(localLayout),
		EndTime:   v.Sale().End().In(a.Location).Format(localLayout),
		Paused:    v.Sale().Paused(), Added: v.Sale().Added(),
		DBStock: s.DB.Stock, Orders: s.DB.Created(), Failed: s.DB.Failed, Unpaid: s.DB.Unpaid, Paid: s.DB.Paid,
		Cancelled: s.DB.Cancelled, Refunding: s.DB.Refunding, Returned: s.DB.Cancelled + s.DB.Refunding,
		Balance: balanceDTO(s.Balance()), Claims: s.Claims,
	}
	if s.GateFound {
		d.GateStock = new(s.GateStock)
	}
	if r := s.Room; r != nil {
		d.Room = &roomBoardDTO{Joined: r.Joined, Waiting: r.Waiting, Admitted: r.Admitted,
			PassesUsed: r.Used, PassesExpired: r.Lapsed, Drawn: r.Drawn}
	}
	if s.Backlog.Known {
		d.Backlog = &backlogDTO{Length: s.Backlog.Length, Pending: s.Backlog.Pending, LagMs: s.Backlog.Lag.Milliseconds()}
	}
	if h := s.History; h.At != nil {
		d.History = &historyDTO{At: make([]int64, len(h.At)), Claims: make(map[string][]int64)}
		for i, t := range h.At {
			d.History.At[i] = t.UnixMilli()
		}
		// Counts only grow: a last count of 0 was never answered.
		for o, n := range h.Claims {
			if len(n) > 0 && n[len(n)-1] > 0 {
				d.History.Claims[o] = n
			}
		}
	}
	return d
}
