package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/domain"
)

// drainPoll is how often the bench counts MySQL's orders while it waits. It
// polls only once the load is over, so the count never competes with claims.
const drainPoll = 10 * time.Millisecond

// countSettled is how many of the voucher's orders MySQL holds, created or
// recorded as failed: both are an order that reached its terminal state.
func countSettled(ctx context.Context, db bun.IDB, voucher domain.VoucherID) (created, failed int, err error) {
	c, err := db.NewSelect().Table("tb_voucher_order").Where("voucher_id = ?", int64(voucher)).Count(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("count orders: %w", err)
	}
	f, err := db.NewSelect().Table("tb_voucher_order_failure").Where("voucher_id = ?", int64(voucher)).Count(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("count failed orders: %w", err)
	}
	return int(c), int(f), nil
}

// waitSettled polls until want orders of the voucher are settled or timeout
// passes, and returns when the last one was seen. Reaching the timeout is
// not an error: the books then count what never arrived as lost.
func waitSettled(ctx context.Context, db bun.IDB, voucher domain.VoucherID, want int, timeout time.Duration) (time.Time, bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		c, f, err := countSettled(ctx, db, voucher)
		if err != nil {
			return time.Time{}, false, err
		}
		now := time.Now()
		if c+f >= want {
			return now, true, nil
		}
		if now.After(deadline) {
			return now, false, nil
		}
		select {
		case <-ctx.Done():
			return now, false, ctx.Err()
		case <-time.After(drainPoll):
		}
	}
}

// books is the check of a run: what users were told against what MySQL holds.
type books struct {
	Stock int `json:"stock"`
	// Told is how many successes the clients were answered; Created and
	// Failed what MySQL holds for the voucher.
	Told    int `json:"told"`
	Created int `json:"created"`
	Failed  int `json:"failed"`
	// Oversold: units sold beyond the stock, by answers or by rows.
	Oversold int `json:"oversold"`
	// Lost: successes answered whose order is not created in MySQL.
	Lost int `json:"lost"`
	// Duplicates: a user told success twice, or holding two rows.
	Duplicates int `json:"duplicates"`
	// Phantom: rows no client was told about (a claim whose answer was lost).
	Phantom int `json:"phantom"`
	// StockLeft is MySQL's remaining stock; StockMismatch is how far it is
	// from Stock - Created (units decremented without an order, or orders
	// without a decrement).
	StockLeft     int `json:"stock_left"`
	StockMismatch int `json:"stock_mismatch"`
}

// check reconciles the answers with MySQL. won is the order ids each user
// was told, by workload index (below zero: an answer whose user the load
// generator cannot tell, one per entry). With db nil (the references, which
// write no orders) only the answers are checked.
func check(ctx context.Context, db bun.IDB, voucher domain.VoucherID, stock int, won map[int][]domain.OrderID) (books, error) {
	b := books{Stock: stock, StockLeft: -1}
	told := map[domain.OrderID]bool{}
	for _, ids := range won {
		b.Told += len(ids)
		if len(ids) > 1 {
			b.Duplicates += len(ids) - 1
		}
		for _, id := range ids {
			told[id] = true
		}
	}
	if db == nil {
		b.Oversold = max(0, b.Told-stock)
		return b, nil
	}
	var rows []struct {
		ID     int64 `bun:"id"`
		UserID int64 `bun:"user_id"`
	}
	if err := db.NewSelect().Table("tb_voucher_order").Column("id", "user_id").
		Where("voucher_id = ?", int64(voucher)).Scan(ctx, &rows); err != nil {
		return b, fmt.Errorf("read orders: %w", err)
	}
	failed, err := db.NewSelect().Table("tb_voucher_order_failure").Where("voucher_id = ?", int64(voucher)).Count(ctx)
	if err != nil {
		return b, fmt.Errorf("count failed orders: %w", err)
	}
	if err := db.NewSelect().Table("tb_seckill_voucher").Column("stock").
		Where("voucher_id = ?", int64(voucher)).Scan(ctx, &b.StockLeft); err != nil {
		return b, fmt.Errorf("read stock: %w", err)
	}
	b.Created, b.Failed = len(rows), int(failed)
	created := make(map[domain.OrderID]bool, len(rows))
	perUser := map[int64]int{}
	for _, r := range rows {
		created[domain.OrderID(r.ID)] = true
		perUser[r.UserID]++
		if perUser[r.UserID] > 1 {
			b.Duplicates++
		}
		if _, ok := told[domain.OrderID(r.ID)]; !ok {
			b.Phantom++
		}
	}
	for id := range told {
		if !created[id] {
			b.Lost++
		}
	}
	b.Oversold = max(0, max(b.Told, b.Created)-stock) + max(0, -b.StockLeft)
	b.StockMismatch = abs(stock - b.Created - b.StockLeft)
	return b, nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
