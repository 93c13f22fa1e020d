package application

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// MaxSaleBoard caps the vouchers one live sale page request reads.
const MaxSaleBoard = 12

// SaleDashboard gathers what the live sale page shows of each sale not ended.
type SaleDashboard struct {
	vouchers ports.VoucherRepository
	rooms    *RoomDirectory
	gate     ports.GateAudit
	ledger   ports.OrderLedger
	queue    ports.QueueMonitor
	claims   ports.ClaimCounts
	clock    ports.Clock
}

func NewSaleDashboard(vouchers ports.VoucherRepository, gate ports.GateAudit, ledger ports.OrderLedger,
	queue ports.QueueMonitor, claims ports.ClaimCounts, rooms *RoomDirectory, clock ports.Clock,
) *SaleDashboard {
	mustHave("SaleDashboard", map[string]any{
		"vouchers": vouchers, "gate": gate, "ledger": ledger, "queue": queue, "claims": claims, "rooms": rooms, "clock": clock,
	})
	return &SaleDashboard{vouchers: vouchers, gate: gate, ledger: ledger, queue: queue, claims: claims, rooms: rooms, clock: clock}
}

// SaleBoardQuery: History adds each sale's last minute of claim counts.
type SaleBoardQuery struct{ History bool }

// SaleBoard: Sales are the first MaxSaleBoard sales not ended (selling, sold
// out, upcoming, each by start time); Total counts them all.
type SaleBoard struct {
	At    time.Time
	Queue ports.QueueOverview
	Sales []SaleRow
	Total int
}

// SaleState is where a sale shown stands.
type SaleState string

const (
	SaleSelling  SaleState = "live"     // started, and the gate has stock left
	SaleSoldOut  SaleState = "sold_out" // started, and the gate has none
	SaleUpcoming SaleState = "upcoming" // not started yet
)

// SaleRow is one sale's figures.
type SaleRow struct {
	Voucher   domain.Voucher
	State     SaleState
	GateFound bool // false: the gate holds no state, GateStock means nothing
	GateStock int
	DB        ports.SaleTally
	Backlog   ports.Backlog
	Claims    map[string]int64
	History   ports.ClaimHistory // only when the query asked for it
	Room      *RoomFigures       // nil: no waiting room
}

// SaleBalance accounts for a sale's units: the database's Initial = stock left
// + unpaid + paid; the gate sold the same units plus the claims in flight.
// Holds is one reading's verdict (a claim between its reads can break it);
// Problem says what is wrong when not.
type SaleBalance struct {
	Initial  int
	InFlight int // the database's stock left minus the gate's
	Holds    bool
	Problem  string
}

// Balance checks the row's books. With a channel queue, orders in flight are
// not counted per voucher: only a gate ahead of the database can be told.
func (r SaleRow) Balance() SaleBalance {
	b := SaleBalance{Initial: r.DB.Stock + int(r.DB.Created()), Holds: true}
	if !r.GateFound {
		b.Holds, b.Problem = false, "Redis holds no state for this sale: claims answer not_found until the repair loop restores it"
		return b
	}
	b.InFlight = r.DB.Stock - r.GateStock
	switch {
	case b.InFlight < 0:
		b.Holds, b.Problem = false, fmt.Sprintf("Redis has %d more units left than MySQL: it forgot orders MySQL has (the repair loop puts them back; `seckill reconcile` shows them)", -b.InFlight)
	case r.Backlog.Known && int64(b.InFlight) > r.Backlog.Length:
		b.Holds, b.Problem = false, fmt.Sprintf("%d claims taken in Redis are neither orders in MySQL nor in the queue (`seckill reconcile` lists them)", int64(b.InFlight)-r.Backlog.Length)
	}
	return b
}

// Handle reads the board; a failing backend fails it rather than show zeros.
// Each sale is read database, gate, then queue: a claim made between the reads
// shows as in flight, never as a gate ahead of the database.
func (h *SaleDashboard) Handle(ctx context.Context, q SaleBoardQuery) (SaleBoard, error) {
	now := h.clock.Now()
	b := SaleBoard{At: now}
	var err error
	if b.Queue, err = h.queue.Overview(ctx); err != nil {
		return b, fmt.Errorf("queue overview: %w", err)
	}
	vs, err := h.vouchers.ListSeckillEndingAfter(ctx, now)
	if err != nil {
		return b, fmt.Errorf("list sales not ended: %w", err)
	}
	b.Total = len(vs)
	// By start time, so the cap keeps the started sales.
	slices.SortFunc(vs, func(x, y domain.Voucher) int {
		return cmp.Or(x.Sale().Begin().Compare(y.Sale().Begin()), cmp.Compare(x.ID(), y.ID()))
	})
	if len(vs) > MaxSaleBoard {
		vs = vs[:MaxSaleBoard]
	}
	b.Sales = make([]SaleRow, 0, len(vs))
	for _, v := range vs {
		row := SaleRow{Voucher: v, State: SaleUpcoming, Claims: h.claims.Claims(v.ID())}
		if q.History {
			row.History = h.claims.History(v.ID())
		}
		if row.DB, err = h.ledger.Tally(ctx, v.ID()); err != nil {
			return b, fmt.Errorf("orders of voucher %d: %w", v.ID(), err)
		}
		if row.GateStock, row.GateFound, err = h.gate.Stock(ctx, v.ID()); err != nil {
			return b, fmt.Errorf("gate stock of voucher %d: %w", v.ID(), err)
		}
		if row.Backlog, err = h.queue.Backlog(ctx, v.ID()); err != nil {
			return b, fmt.Errorf("queue backlog of voucher %d: %w", v.ID(), err)
		}
		if f, ok, err := h.rooms.Read(ctx, v); err != nil {
			return b, fmt.Errorf("waiting room of voucher %d: %w", v.ID(), err)
		} else if ok {
			row.Room = &f
		}
		if v.Sale().Started(now) {
			row.State = SaleSelling
			if row.GateFound && row.GateStock == 0 {
				row.State = SaleSoldOut
			}
		}
		b.Sales = append(b.Sales, row)
	}
	rank := map[SaleState]int{SaleSelling: 0, SaleSoldOut: 1, SaleUpcoming: 2}
	slices.SortStableFunc(b.Sales, func(x, y SaleRow) int { return cmp.Compare(rank[x.State], rank[y.State]) })
	return b, nil
}

// The bounds of a sale's order list: no answer is as large as the sale.
const (
	DefaultOrderPage = 100
	MaxOrderPage     = 1000
	ExportPage       = 1000 // what Export holds in memory
)

// ListSaleOrders reads a sale's orders for its operator, a page at a time.
type ListSaleOrders struct {
	vouchers ports.VoucherRepository
	orders   ports.SaleOrders
}

func NewListSaleOrders(vouchers ports.VoucherRepository, orders ports.SaleOrders) *ListSaleOrders {
	mustHave("ListSaleOrders", map[string]any{"vouchers": vouchers, "orders": orders})
	return &ListSaleOrders{vouchers: vouchers, orders: orders}
}

// SaleOrdersQuery: the orders with ids above After, at most Limit (0: the default).
type SaleOrdersQuery struct {
	Voucher domain.VoucherID
	Filter  domain.OrderFilter
	After   domain.OrderID
	Limit   int
}

// SaleOrdersPage: Next is the next page's cursor (0: this is the last).
type SaleOrdersPage struct {
	Orders []domain.OrderStatus
	Next   domain.OrderID
}

// Handle answers one page; bad input is refused before anything is read.
func (h *ListSaleOrders) Handle(ctx context.Context, q SaleOrdersQuery) (SaleOrdersPage, error) {
	if q.Limit == 0 {
		q.Limit = DefaultOrderPage
	}
	if q.Limit < 1 || q.Limit > MaxOrderPage {
		return SaleOrdersPage{}, &domain.ValidationError{Field: "limit", Reason: fmt.Sprintf("must be 1 to %d", MaxOrderPage)}
	}
	if q.After < 0 {
		return SaleOrdersPage{}, &domain.ValidationError{Field: "after", Reason: "must be an order id (or 0)"}
	}
	if err := h.exists(ctx, q.Voucher); err != nil {
		return SaleOrdersPage{}, err
	}
	got, err := h.orders.OrdersAfter(ctx, q.Voucher, q.Filter, q.After, q.Limit+1)
	if err != nil {
		return SaleOrdersPage{}, fmt.Errorf("list orders of voucher %d: %w", q.Voucher, err)
	}
	page := SaleOrdersPage{Orders: got}
	if len(got) > q.Limit { // the one more than asked
		page.Orders = got[:q.Limit]
		page.Next = page.Orders[q.Limit-1].Order.ID()
	}
	return page, nil
}

// Export hands every order the filter selects to page, ExportPage at a time in
// id order. page is called at least once, and only once the voucher was found,
// so a caller can answer "not found" before writing. There is no snapshot:
// an order is listed as its page read it, and none twice.
func (h *ListSaleOrders) Export(ctx context.Context, voucher domain.VoucherID, filter domain.OrderFilter, page func([]domain.OrderStatus) error) error {
	if err := h.exists(ctx, voucher); err != nil {
		return err
	}
	var after domain.OrderID
	for first := true; ; first = false {
		got, err := h.orders.OrdersAfter(ctx, voucher, filter, after, ExportPage)
		if err != nil {
			return fmt.Errorf("export orders of voucher %d after %d: %w", voucher, after, err)
		}
		if len(got) > 0 || first {
			if err := page(got); err != nil {
				return err
			}
		}
		if len(got) < ExportPage {
			return nil
		}
		after = got[len(got)-1].Order.ID()
	}
}

func (h *ListSaleOrders) exists(ctx context.Context, voucher domain.VoucherID) error {
	if voucher <= 0 {
		return domain.ErrVoucherNotFound
	}
	if _, err := h.vouchers.Get(ctx, voucher); err != nil {
		return fmt.Errorf("voucher %d: %w", voucher, err)
	}
	return nil
}
