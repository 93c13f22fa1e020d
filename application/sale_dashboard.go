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
// SQL query, one gate read and one queue read.
const MaxSaleBoard = 12

// SaleDashboard gathers what the live sale page shows: for each sale that
// has not ended, the stock left in the gate and in the database, the orders
// recorded, this instance's claim answers and the queue's backlog.
type SaleDashboard struct {
	vouchers ports.VoucherRepository
	gate     ports.GateAudit
	ledger   ports.OrderLedger
	queue    ports.QueueMonitor
	claims   ports.ClaimCounts
	clock    ports.Clock
}

func NewSaleDashboard(vouchers ports.VoucherRepository, gate ports.GateAudit, ledger ports.OrderLedger,
	queue ports.QueueMonitor, claims ports.ClaimCounts, clock ports.Clock,
) *SaleDashboard {
	mustHave("SaleDashboard", map[string]any{
		"vouchers": vouchers, "gate": gate, "ledger": ledger, "queue": queue, "claims": claims, "clock": clock,
	})
	return &SaleDashboard{vouchers: vouchers, gate: gate, ledger: ledger, queue: queue, claims: claims, clock: clock}
}

// SaleBoard is one reading of every sale shown.
type SaleBoard struct {
	At    time.Time
	Queue ports.QueueOverview
	// Sales are the first MaxSaleBoard sales that have not ended, live ones
	// first, each group by start time; Total counts them all.
	Sales []SaleRow
	Total int
}

// SaleRow is one sale's figures.
type SaleRow struct {
	Voucher domain.Voucher
	Live    bool // started; false: not started yet
	// GateFound is false when the gate holds no state for the voucher (lost,
	// or expired): GateStock is then meaningless.
	GateFound bool
	GateStock int
	DB        ports.SaleTally
	Backlog   ports.Backlog
	Claims    map[string]int64
}

// Handle reads the board. A failing backend fails the reading: a page that
// silently showed zeros would mislead whoever watches a sale.
func (h *SaleDashboard) Handle(ctx context.Context) (SaleBoard, error) {
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
	started := func(v domain.Voucher) bool { return !v.Sale().Begin().After(now) }
	slices.SortFunc(vs, func(x, y domain.Voucher) int {
		if sx, sy := started(x), started(y); sx != sy {
			if sx {
				return -1
			}
			return 1
		}
		if c := x.Sale().Begin().Compare(y.Sale().Begin()); c != 0 {
			return c
		}
		return cmp.Compare(x.ID(), y.ID())
	})
	if len(vs) > MaxSaleBoard {
		vs = vs[:MaxSaleBoard]
	}
	b.Sales = make([]SaleRow, 0, len(vs))
	for _, v := range vs {
		row := SaleRow{Voucher: v, Live: started(v), Claims: h.claims.Claims(v.ID())}
		if row.GateStock, row.GateFound, err = h.gate.Stock(ctx, v.ID()); err != nil {
			return b, fmt.Errorf("gate stock of voucher %d: %w", v.ID(), err)
		}
		if row.DB, err = h.ledger.Tally(ctx, v.ID()); err != nil {
			return b, fmt.Errorf("orders of voucher %d: %w", v.ID(), err)
		}
		if row.Backlog, err = h.queue.Backlog(ctx, v.ID()); err != nil {
			return b, fmt.Errorf("queue backlog of voucher %d: %w", v.ID(), err)
		}
		b.Sales = append(b.Sales, row)
	}
	return b, nil
}
