package mysqlstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var _ ports.OrderRepository = (*OrderRepo)(nil)

// OrderRepo records orders in tb_voucher_order and refused ones in
// tb_voucher_order_failure.
//
// Why no per-user distributed lock (the original's Redisson lock on
// "order:<userId>") is needed: CreateBatch first locks the stock row of every
// voucher in the batch (SELECT ... FOR UPDATE on MySQL; on SQLite the
// IMMEDIATE transaction already holds the database's single write lock). Every
// write of a voucher's orders therefore runs one transaction at a time, and
// the checks it makes (does this order ID exist, does this user already hold
// an order, how much stock is left) cannot be invalidated before it commits.
// Behind those checks the database itself enforces the rules: the order-ID
// primary key makes a redelivered order a no-op, UNIQUE(user_id, voucher_id)
// refuses a second order of a user, and the guarded decrement with
// CHECK (stock >= 0) refuses to oversell; were the row lock ever missing,
// these would still keep the data right, at the cost of batches failing and
// being retried. Several instances and several workers can therefore write
// batches at once, with no lock outside the database.
type OrderRepo struct {
	db *bun.DB
}

func NewOrderRepo(db *bun.DB) *OrderRepo {
	if db == nil {
		panic("mysqlstore: NewOrderRepo needs a database")
	}
	return &OrderRepo{db: db}
}

// CreateBatch classifies and writes the batch in one transaction; see the
// type's comment for why that is safe without other locks. Each order, in
// input order, is:
//   - already recorded under its ID: its recorded outcome again, New=false;
//   - an ID recorded for another user or voucher: failed id_conflict;
//   - of a voucher without a sale: failed voucher_not_found;
//   - of a user who holds an order of the voucher (also one accepted earlier
//     in this batch): failed duplicate;
//   - past the remaining stock: failed out_of_stock;
//   - otherwise created.
//
// Any error rolls the whole batch back, so the caller retries it whole.
func (r *OrderRepo) CreateBatch(ctx context.Context, orders []domain.VoucherOrder) ([]ports.Outcome, error) {
	if len(orders) == 0 {
		return []ports.Outcome{}, nil
	}
	var outcomes []ports.Outcome
	err := r.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		outcomes, err = r.createBatch(ctx, tx, orders)
		return err
	})
	if err != nil {
		return nil, wrap(fmt.Sprintf("create batch of %d orders", len(orders)), err)
	}
	return outcomes, nil
}

func (r *OrderRepo) createBatch(ctx context.Context, db bun.IDB, orders []domain.VoucherOrder) ([]ports.Outcome, error) {
	// Locks first, reads after: under REPEATABLE READ, InnoDB takes a
	// transaction's snapshot at its first plain read, so reading only once
	// every stock row is locked shows everything the previous holder of each
	// lock committed. (Were that ever not so, the INSERT IGNORE counts below
	// would catch it and the batch would be retried.)
	stock, err := r.lockStock(ctx, db, voucherIDs(orders))
	if err != nil {
		return nil, err
	}
	st := batchState{
		stock:   stock,
		created: map[domain.OrderID]domain.VoucherOrder{},
		failed:  map[domain.OrderID]recordedFailure{},
		holders: map[domain.VoucherID]map[domain.UserID]domain.OrderID{},
	}
	if err := r.readRecorded(ctx, db, orders, &st); err != nil {
		return nil, err
	}
	if err := r.readHolders(ctx, db, orders, &st); err != nil {
		return nil, err
	}

	plan := classify(orders, st)

	if len(plan.accepted) > 0 {
		rows := make([]orderModel, len(plan.accepted))
		for i, o := range plan.accepted {
			rows[i] = toOrderModel(o)
		}
		if err := insertIgnoring(ctx, db, &rows, len(rows), "tb_voucher_order"); err != nil {
			return nil, err
		}
	}
	for _, v := range sortedKeys(plan.taken) {
		n := plan.taken[v]
		res, err := db.NewUpdate().Table("tb_seckill_voucher").
			Set("stock = stock - ?", n).
			Set("update_time = ?", time.Now().UTC()).
			Where("voucher_id = ?", int64(v)).
			Where("stock >= ?", n).
			Exec(ctx)
		if err != nil {
			return nil, fmt.Errorf("decrement stock of voucher %d by %d: %w", v, n, err)
		}
		if affected, err := res.RowsAffected(); err != nil || affected != 1 {
			// The row is locked and its stock was read under the lock, so
			// this is a bug, not a race: refuse to commit anything.
			return nil, fmt.Errorf("decrement stock of voucher %d by %d: guard matched %d rows (%v)", v, n, affected, err)
		}
	}
	if len(plan.failures) > 0 {
		rows := make([]failureModel, len(plan.failures))
		for i, f := range plan.failures {
			o := f.Order
			rows[i] = failureModel{OrderID: int64(o.ID()), UserID: int64(o.UserID()), VoucherID: int64(o.VoucherID()), Reason: string(f.Reason)}
		}
		if err := insertIgnoring(ctx, db, &rows, len(rows), "tb_voucher_order_failure"); err != nil {
			return nil, err
		}
	}
	return plan.outcomes, nil
}

// insertIgnoring is the second line of defence behind the checks: a row the
// checks missed is skipped by the keys instead of failing the statement, and
// the count then tells the batch was classified on stale reads, so it is
// rolled back and retried rather than reporting an outcome that is not true.
func insertIgnoring(ctx context.Context, db bun.IDB, rows any, want int, table string) error {
	res, err := db.NewInsert().Model(rows).Ignore().Returning("").Exec(ctx)
	if err != nil {
		return fmt.Errorf("insert %d rows into %s: %w", want, table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("insert %d rows into %s: %w", want, table, err)
	}
	if n != int64(want) {
		return fmt.Errorf("insert into %s: %d of %d rows already existed: %w", table, int64(want)-n, want, errConcurrentWrite)
	}
	return nil
}

// errConcurrentWrite: the batch raced a write the locks do not cover (an order
// ID reused across vouchers, or a failure recorded for a voucher that has no
// stock row to lock). Retrying reads the winner's rows and settles it.
var errConcurrentWrite = fmt.Errorf("concurrent write detected: %w", ErrTransient)

// lockStock returns the remaining stock of the vouchers that have a sale,
// locking their rows in ascending ID order so that two batches with vouchers
// in common cannot deadlock.
func (r *OrderRepo) lockStock(ctx context.Context, db bun.IDB, vouchers []int64) (map[domain.VoucherID]int, error) {
	var rows []seckillModel
	q := db.NewSelect().Model(&rows).Column("voucher_id", "stock").
		Where("voucher_id IN (?)", bun.List(vouchers)).
		Order("voucher_id")
	// SQLite has no FOR UPDATE: the IMMEDIATE transaction already holds the
	// only write lock.
	if r.db.Dialect().Name() != dialect.SQLite {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("lock stock rows: %w", err)
	}
	stock := make(map[domain.VoucherID]int, len(rows))
	for _, row := range rows {
		stock[domain.VoucherID(row.VoucherID)] = row.Stock
	}
	return stock, nil
}

// readRecorded loads what earlier deliveries recorded under the batch's IDs.
func (r *OrderRepo) readRecorded(ctx context.Context, db bun.IDB, orders []domain.VoucherOrder, st *batchState) error {
	ids := make([]int64, 0, len(orders))
	for _, o := range orders {
		ids = append(ids, int64(o.ID()))
	}
	var created []orderModel
	if err := db.NewSelect().Model(&created).Where("id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
		return fmt.Errorf("read recorded orders: %w", err)
	}
	for _, row := range created {
		o, err := row.toDomain()
		if err != nil {
			return err
		}
		st.created[o.ID()] = o
	}
	var failed []failureModel
	if err := db.NewSelect().Model(&failed).Where("order_id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
		return fmt.Errorf("read recorded failures: %w", err)
	}
	for _, row := range failed {
		o, err := row.toDomain()
		if err != nil {
			return err
		}
		reason, err := domain.ParseFailureReason(row.Reason)
		if err != nil {
			return fmt.Errorf("stored failure of order %d: %w", row.OrderID, err)
		}
		st.failed[o.ID()] = recordedFailure{order: o, reason: reason}
	}
	return nil
}

// readHolders finds, for each locked voucher, which of the batch's users
// already hold an order for it.
func (r *OrderRepo) readHolders(ctx context.Context, db bun.IDB, orders []domain.VoucherOrder, st *batchState) error {
	users := map[domain.VoucherID][]int64{}
	for _, o := range orders {
		if _, ok := st.stock[o.VoucherID()]; ok {
			users[o.VoucherID()] = append(users[o.VoucherID()], int64(o.UserID()))
		}
	}
	for _, v := range sortedKeys(users) {
		var rows []orderModel
		err := db.NewSelect().Model(&rows).
			Where("voucher_id = ?", int64(v)).
			Where("user_id IN (?)", bun.List(users[v])).
			Scan(ctx)
		if err != nil {
			return fmt.Errorf("read buyers of voucher %d: %w", v, err)
		}
		held := make(map[domain.UserID]domain.OrderID, len(rows))
		for _, row := range rows {
			held[domain.UserID(row.UserID)] = domain.OrderID(row.ID)
		}
		st.holders[v] = held
	}
	return nil
}

// MarkFailed locks the vouchers' stock rows like CreateBatch, so a batch
// creating one of these orders (another consumer's redelivery) runs wholly
// before or after it, and no order ends both created and failed.
func (r *OrderRepo) MarkFailed(ctx context.Context, orders []domain.VoucherOrder, reason domain.FailureReason) ([]ports.Outcome, error) {
	if len(orders) == 0 {
		return []ports.Outcome{}, nil
	}
	var outcomes []ports.Outcome
	err := r.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := r.lockStock(ctx, tx, voucherIDs(orders)); err != nil {
			return err
		}
		st := batchState{created: map[domain.OrderID]domain.VoucherOrder{}, failed: map[domain.OrderID]recordedFailure{}}
		if err := r.readRecorded(ctx, tx, orders, &st); err != nil {
			return err
		}
		outcomes = make([]ports.Outcome, 0, len(orders))
		var rows []failureModel
		for _, o := range orders {
			out := ports.Outcome{Order: o, State: domain.OrderFailed, Reason: reason}
			if rec, ok := st.recorded(o.ID()); ok {
				out.State, out.Reason = rec.Redelivery(o)
				out.New = out.Reason == domain.FailIDConflict
			} else {
				out.New = true
				st.failed[o.ID()] = recordedFailure{order: o, reason: reason}
				rows = append(rows, failureModel{OrderID: int64(o.ID()), UserID: int64(o.UserID()), VoucherID: int64(o.VoucherID()), Reason: string(reason)})
			}
			outcomes = append(outcomes, out)
		}
		if len(rows) == 0 {
			return nil
		}
		return insertIgnoring(ctx, tx, &rows, len(rows), "tb_voucher_order_failure")
	})
	if err != nil {
		return nil, wrap(fmt.Sprintf("mark %d orders failed", len(orders)), err)
	}
	return outcomes, nil
}

func (r *OrderRepo) Find(ctx context.Context, id domain.OrderID) (domain.OrderStatus, error) {
	var created []orderModel
	if err := r.db.NewSelect().Model(&created).Where("id = ?", int64(id)).Scan(ctx); err != nil {
		return domain.OrderStatus{}, wrap(fmt.Sprintf("find order %d", id), err)
	}
	if len(created) > 0 {
		o, err := created[0].toDomain()
		if err != nil {
			return domain.OrderStatus{}, err
		}
		return domain.OrderStatus{Order: o, State: domain.OrderCreated}, nil
	}
	var failed []failureModel
	if err := r.db.NewSelect().Model(&failed).Where("order_id = ?", int64(id)).Scan(ctx); err != nil {
		return domain.OrderStatus{}, wrap(fmt.Sprintf("find failed order %d", id), err)
	}
	if len(failed) == 0 {
		return domain.OrderStatus{}, domain.ErrOrderNotFound
	}
	o, err := failed[0].toDomain()
	if err != nil {
		return domain.OrderStatus{}, err
	}
	reason, err := domain.ParseFailureReason(failed[0].Reason)
	if err != nil {
		return domain.OrderStatus{}, fmt.Errorf("stored failure of order %d: %w", id, err)
	}
	return domain.OrderStatus{Order: o, State: domain.OrderFailed, Reason: reason}, nil
}

func (r *OrderRepo) Buyers(ctx context.Context, voucher domain.VoucherID) ([]domain.VoucherOrder, error) {
	var rows []orderModel
	if err := r.db.NewSelect().Model(&rows).Where("voucher_id = ?", int64(voucher)).Order("id").Scan(ctx); err != nil {
		return nil, wrap(fmt.Sprintf("list buyers of voucher %d", voucher), err)
	}
	buyers := make([]domain.VoucherOrder, 0, len(rows))
	for _, row := range rows {
		o, err := row.toDomain()
		if err != nil {
			return nil, err
		}
		buyers = append(buyers, o)
	}
	return buyers, nil
}

// batchState is what the database holds that a batch's outcomes depend on.
type batchState struct {
	stock   map[domain.VoucherID]int // remaining; no entry: the voucher has no sale
	created map[domain.OrderID]domain.VoucherOrder
	failed  map[domain.OrderID]recordedFailure
	holders map[domain.VoucherID]map[domain.UserID]domain.OrderID
}

// recorded is what the batch state holds under id.
func (st batchState) recorded(id domain.OrderID) (domain.OrderStatus, bool) {
	if o, ok := st.created[id]; ok {
		return domain.OrderStatus{Order: o, State: domain.OrderCreated}, true
	}
	if f, ok := st.failed[id]; ok {
		return domain.OrderStatus{Order: f.order, State: domain.OrderFailed, Reason: f.reason}, true
	}
	return domain.OrderStatus{}, false
}

type recordedFailure struct {
	order  domain.VoucherOrder
	reason domain.FailureReason
}

type batchPlan struct {
	outcomes []ports.Outcome
	accepted []domain.VoucherOrder
	failures []ports.Outcome // new failures to record
	taken    map[domain.VoucherID]int
}

// classify decides every order's outcome, in input order. It changes st (the
// stock it hands out, the users it makes holders), so one user's second order
// in a batch is a duplicate and stock runs out where the input says.
//
// An order whose ID is already taken by a different order fails id_conflict
// and is not recorded: the ID's row belongs to the other order.
func classify(orders []domain.VoucherOrder, st batchState) batchPlan {
	plan := batchPlan{outcomes: make([]ports.Outcome, 0, len(orders)), taken: map[domain.VoucherID]int{}}
	first := map[domain.OrderID]int{} // where an ID first appears in this batch
	fail := func(o domain.VoucherOrder, reason domain.FailureReason, record bool) ports.Outcome {
		out := ports.Outcome{Order: o, State: domain.OrderFailed, Reason: reason, New: true}
		if record {
			plan.failures = append(plan.failures, out)
		}
		return out
	}
	for _, o := range orders {
		var out ports.Outcome
		if i, seen := first[o.ID()]; seen {
			// Delivered twice in one batch: the second copy is a redelivery.
			if plan.outcomes[i].Order == o {
				out = plan.outcomes[i]
				out.New = false
			} else {
				out = fail(o, domain.FailIDConflict, false)
			}
			plan.outcomes = append(plan.outcomes, out)
			continue
		}
		first[o.ID()] = len(plan.outcomes)

		v, u := o.VoucherID(), o.UserID()
		if c, ok := st.created[o.ID()]; ok {
			if c == o {
				out = ports.Outcome{Order: o, State: domain.OrderCreated}
			} else {
				out = fail(o, domain.FailIDConflict, false)
			}
		} else if f, ok := st.failed[o.ID()]; ok {
			if f.order == o {
				out = ports.Outcome{Order: o, State: domain.OrderFailed, Reason: f.reason}
			} else {
				out = fail(o, domain.FailIDConflict, false)
			}
		} else if left, ok := st.stock[v]; !ok {
			out = fail(o, domain.FailVoucherGone, true)
		} else if _, holds := st.holders[v][u]; holds {
			out = fail(o, domain.FailDuplicate, true)
		} else if left <= 0 {
			out = fail(o, domain.FailOutOfStock, true)
		} else {
			st.stock[v] = left - 1
			if st.holders[v] == nil {
				st.holders[v] = map[domain.UserID]domain.OrderID{}
			}
			st.holders[v][u] = o.ID()
			plan.taken[v]++
			plan.accepted = append(plan.accepted, o)
			out = ports.Outcome{Order: o, State: domain.OrderCreated, New: true}
		}
		plan.outcomes = append(plan.outcomes, out)
	}
	return plan
}

func voucherIDs(orders []domain.VoucherOrder) []int64 {
	ids := make([]int64, 0, len(orders))
	for _, o := range orders {
		ids = append(ids, int64(o.VoucherID()))
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func sortedKeys[V any](m map[domain.VoucherID]V) []domain.VoucherID {
	keys := make([]domain.VoucherID, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
