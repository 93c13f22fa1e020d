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

// MaxSaleBoard caps the vouchers one live sale page request reads, so its
// cost stays bounded however many sales an admin schedules: per voucher one
// SQL query, one gate read, one queue read and, for a sale with a waiting
// room, at most one room read per RoomRefresh.
const MaxSaleBoard = 12

// SaleDashboard gathers what the live sale page shows: for each sale that
// has not ended, the stock left in the gate and in the database, the orders
// recorded, this instance's claim answers, the queue's backlog and, for a
// sale with one, its waiting room.
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

// SaleBoardQuery says what one reading includes.
type SaleBoardQuery struct {
	// History adds each sale's claim counts over the last minute
	// (ports.ClaimCounts.History): a page asks once, when it opens.
	History bool
}

// SaleBoard is one reading of every sale shown.
type SaleBoard struct {
	At    time.Time
	Queue ports.QueueOverview
	// Sales are the first MaxSaleBoard sales that have not ended: those
	// selling, then those sold out, then those not started, each group by
	// start time. Total counts every sale not ended.
	Sales []SaleRow
	Total int
}

// SaleState is where a sale shown stands.
type SaleState string

const (
	SaleSelling  SaleState = "live"     // started, and the gate has stock left
	SaleSoldOut  SaleState = "sold_out" // started, and the gate has none (an expiry can put a unit back)
	SaleUpcoming SaleState = "upcoming" // not started yet
)

// SaleRow is one sale's figures.
type SaleRow struct {
	Voucher domain.Voucher
	State   SaleState
	// GateFound is false when the gate holds no state for the voucher (lost,
	// or expired): GateStock is then meaningless.
	GateFound bool
	GateStock int
	DB        ports.SaleTally
	Backlog   ports.Backlog
	Claims    map[string]int64
	History   ports.ClaimHistory // only when the query asked for it
	// Room is the sale's waiting room (nil: it has none).
	Room *RoomFigures
}

// SaleBalance accounts for a sale's units on both sides. The database keeps
// Initial = stock left + unpaid + paid in each transaction (a cancelled
// order's unit is back in its stock); the gate has sold the same units plus
// the claims in flight, those it holds that are not an order in the
// database yet.
type SaleBalance struct {
	Initial  int
	InFlight int // the database's stock left minus the gate's
	// Holds is this reading's verdict; Problem says what is wrong when not.
	// A claim committed between the reading's steps can break one reading
	// (the page flags an imbalance seen in a row); a standing one is a gate
	// that lost orders, or claims that neither the queue nor the database
	// has.
	Holds   bool
	Problem string
}

// Balance checks the row's books. With a channel queue, orders in flight
// are not counted per voucher, so only a gate ahead of the database (too
// much stock) can be told.
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

// Handle reads the board. A failing backend fails the reading: a page that
// silently showed zeros would mislead whoever watches a sale.
//
// Each sale is read database first, then gate, then queue: a claim made
// between the reads shows as in flight (the gate has it, the database's
// read did not), never as a gate ahead of the database.
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
	// By start time: the started sales come first, so the cap keeps them;
	// whether one sold out is known only once its gate is read, below.
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

// The bounds of a sale's order list. A page is one indexed range read per
// status of the filter; MaxOrderPage keeps an admin's (or a stolen admin
// token's) request from making one answer as large as the sale.
const (
	DefaultOrderPage = 100
	MaxOrderPage     = 1000
	// ExportPage is how many orders the export reads at a time: what it
	// holds in memory, whatever the sale's size.
	ExportPage = 1000
)

// ListSaleOrders reads a sale's orders for its operator: a page at a time
// (Handle), or all of them a page at a time (Export), never the whole sale
// at once.
type ListSaleOrders struct {
	vouchers ports.VoucherRepository
	orders   ports.SaleOrders
}

func NewListSaleOrders(vouchers ports.VoucherRepository, orders ports.SaleOrders) *ListSaleOrders {
	mustHave("ListSaleOrders", map[string]any{"vouchers": vouchers, "orders": orders})
	return &ListSaleOrders{vouchers: vouchers, orders: orders}
}

// SaleOrdersQuery is one page: the voucher's orders the filter selects,
// with ids above After (0: from the first), at most Limit (0: the default).
type SaleOrdersQuery struct {
	Voucher domain.VoucherID
	Filter  domain.OrderFilter
	After   domain.OrderID
	Limit   int
}

// SaleOrdersPage is a page, and the cursor of the next one (0: this is the
// last).
type SaleOrdersPage struct {
	Orders []domain.OrderStatus
	Next   domain.OrderID
}

// Handle answers one page; a voucher that does not exist is
// domain.ErrVoucherNotFound, a limit or cursor out of range a validation
// error, and nothing is read for either.
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
	// One more than asked tells whether there is a next page without
	// another read.
	got, err := h.orders.OrdersAfter(ctx, q.Voucher, q.Filter, q.After, q.Limit+1)
	if err != nil {
		return SaleOrdersPage{}, fmt.Errorf("list orders of voucher %d: %w", q.Voucher, err)
	}
	page := SaleOrdersPage{Orders: got}
	if len(got) > q.Limit {
		page.Orders = got[:q.Limit]
		page.Next = page.Orders[q.Limit-1].Order.ID()
	}
	return page, nil
}

// Export hands every order the filter selects to page, ExportPage at a
// time in id order, and holds no more than one page: what it costs in
// memory does not grow with the sale. page is called at least once (with
// no orders for a sale that has none), the first time only once the
// voucher was found, so a caller can answer "not found" before it writes
// anything. The orders are read page by page, not as one snapshot: an
// order that changes state during the export is listed as one page read
// it, and none is listed twice.
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
