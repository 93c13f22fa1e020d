package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/hmdp-go/seckill/application"
)

// salesBoardTimeout keeps a stalled backend from piling up polls.
const salesBoardTimeout = 2 * time.Second

// saleBoardDTO: the page derives rates from two readings' counts and At.
// QueueLength and DeadLetters are omitted where the queue keeps none.
type saleBoardDTO struct {
	At          string    `json:"at"`
	Queue       string    `json:"queue"`
	Sales       []saleDTO `json:"sales"`
	QueueLength *int64    `json:"queueLength,omitempty"`
	DeadLetters *int64    `json:"deadLetters,omitempty"`
}

// saleDTO is one sale on the live page. Orders are those holding a unit
// (unpaid + paid); Returned is the units given back (cancelled, refunding).
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

// roomBoardDTO is a waiting room as last read (at most 250 ms ago); drawn
// once the pre-queue's order was drawn at the begin.
type roomBoardDTO struct {
	Joined        int64 `json:"joined"`
	Waiting       int64 `json:"waiting"`
	Admitted      int64 `json:"admitted"`
	PassesUsed    int64 `json:"passesUsed"`
	PassesExpired int64 `json:"passesExpired"`
	Drawn         bool  `json:"drawn"`
}

type balanceDTO struct {
	Initial  int    `json:"initial"`
	InFlight int    `json:"inFlight"`
	Holds    bool   `json:"holds"`
	Problem  string `json:"problem,omitempty"`
}

// historyDTO is the claim counts of the last minute, one reading a second:
// claims[outcome][i] was the count at at[i] (Unix milliseconds).
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
	ctx, cancel := context.WithTimeout(r.Context(), salesBoardTimeout)
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
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, envelope{Success: true, Data: out, Total: int64(b.Total)})
	return nil
}

func (a *api) saleDTO(s application.SaleRow) saleDTO {
	v, bal := s.Voucher, s.Balance()
	d := saleDTO{
		ID:        strconv.FormatInt(int64(v.ID()), 10),
		Title:     v.Title(),
		State:     string(s.State),
		BeginTime: v.Sale().Begin().In(a.Location).Format(localLayout),
		EndTime:   v.Sale().End().In(a.Location).Format(localLayout),
		Paused:    v.Sale().Paused(),
		Added:     v.Sale().Added(),
		DBStock:   s.DB.Stock,
		Orders:    s.DB.Created(),
		Failed:    s.DB.Failed,
		Unpaid:    s.DB.Unpaid,
		Paid:      s.DB.Paid,
		Cancelled: s.DB.Cancelled,
		Refunding: s.DB.Refunding,
		Returned:  s.DB.Cancelled + s.DB.Refunding,
		Balance:   balanceDTO{Initial: bal.Initial, InFlight: bal.InFlight, Holds: bal.Holds, Problem: bal.Problem},
		Claims:    s.Claims,
	}
	if s.GateFound {
		stock := s.GateStock
		d.GateStock = &stock
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
