package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The schema, its migrations and opening a database, on both SQL dialects:
// what only this adapter has, and what the repository contract in
// test/contract cannot see from the ports.

// repos are the adapter's repositories on one migrated database.
type repos struct {
	vouchers *mysqlstore.VoucherRepo
	orders   *mysqlstore.OrderRepo
}

func reposOn(t *testing.T, db *bun.DB) repos {
	t.Helper()
	if _, err := mysqlstore.Migrate(ctx(t), db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return repos{vouchers: mysqlstore.NewVoucherRepo(db), orders: mysqlstore.NewOrderRepo(db)}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func openSQLite(t *testing.T, path string) *bun.DB {
	t.Helper()
	return closedAtEnd(t, "SQLite")(mysqlstore.OpenSQLite(path))
}

func openMySQL(t *testing.T, dsn string) *bun.DB {
	t.Helper()
	return closedAtEnd(t, "MySQL")(mysqlstore.OpenMySQL(dsn))
}

// closedAtEnd fails the test if the database did not open, and closes it
// when the test ends.
func closedAtEnd(t *testing.T, what string) func(*bun.DB, error) *bun.DB {
	return func(db *bun.DB, err error) *bun.DB {
		t.Helper()
		if err != nil {
			t.Fatalf("open %s: %v", what, err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
}

// zone is not UTC, so a repository that stored wall-clock times as given
// would be caught.
var zone = time.FixedZone("UTC+8", 8*60*60)

func add(t *testing.T, s repos, shop domain.ShopID, stock int) domain.Voucher {
	t.Helper()
	begin := testenv.Now().In(zone)
	return addSale(t, s, domain.VoucherSpec{ShopID: shop, Title: "seckill", PayValue: 8000, ActualValue: 10000},
		stock, begin, begin.Add(2*time.Hour))
}

func addSale(t *testing.T, s repos, spec domain.VoucherSpec, stock int, begin, end time.Time) domain.Voucher {
	t.Helper()
	saved, err := s.vouchers.AddSeckill(ctx(t), testenv.SeckillVoucher(t, spec, stock, begin, end))
	if err != nil {
		t.Fatalf("add seckill voucher: %v", err)
	}
	return saved
}

func get(t *testing.T, s repos, id domain.VoucherID) domain.Voucher {
	t.Helper()
	v, err := s.vouchers.Get(ctx(t), id)
	if err != nil {
		t.Fatalf("get voucher %d: %v", id, err)
	}
	return v
}

func stockIs(t *testing.T, s repos, id domain.VoucherID, want int) {
	t.Helper()
	if got := get(t, s, id).Sale().Stock(); got != want {
		t.Fatalf("stock of voucher %d: got %d, want %d", id, got, want)
	}
}

// sameVoucher compares what a round trip through the database must keep.
func sameVoucher(t *testing.T, got, want domain.Voucher) {
	t.Helper()
	f := func(v domain.Voucher) string {
		s := v.Sale()
		return fmt.Sprintf("%d shop %d %q pay %d actual %d seckill %v stock %d [%s, %s)", v.ID(), v.ShopID(), v.Title(),
			v.PayValue(), v.ActualValue(), v.IsSeckill(), s.Stock(), s.Begin().UTC(), s.End().UTC())
	}
	if f(got) != f(want) {
		t.Fatalf("voucher:\n got %s\nwant %s", f(got), f(want))
	}
}

type sqlBackend struct {
	name string
	// open checks the backend once (it may skip) and returns a factory of
	// fresh, unmigrated databases. Each database comes as connect, which opens
	// another pool on it, as another instance of the service would.
	open func(t *testing.T) func(t *testing.T) (connect func(t *testing.T) *bun.DB)
}

func sqlBackends() []sqlBackend {
	return []sqlBackend{
		{name: "sqlite", open: func(*testing.T) func(*testing.T) func(*testing.T) *bun.DB {
			return func(t *testing.T) func(*testing.T) *bun.DB {
				path := testenv.SQLitePath(t)
				return func(t *testing.T) *bun.DB { return openSQLite(t, path) }
			}
		}},
		{name: "mysql", open: func(t *testing.T) func(*testing.T) func(*testing.T) *bun.DB {
			testenv.MySQLDSN(t)
			return func(t *testing.T) func(*testing.T) *bun.DB {
				dsn := testenv.MySQLDSN(t)
				return func(t *testing.T) *bun.DB { return openMySQL(t, dsn) }
			}
		}},
	}
}

// migrations are every migration, in order; a fresh database applies
// them as one group, and each migrate down undoes one of them.
var migrations = []string{"20250101000001_create_seckill_tables", "20261201000001_create_voucher_creation", "20261201000012_add_seckill_buckets", "20261202000001_create_deployment", "20261203000001_order_lifecycle", "20261204000001_payments", "20261205000001_add_waiting_room", "20261206000001_forfeit_after_cancel", "20261207000041_create_admin_audit", "20261207000042_add_order_list_index", "20261208000001_sale_controls", "20261209000011_limit_per_user"}

func migrateUp(t *testing.T, db *bun.DB, want ...string) {
	t.Helper()
	applied, err := mysqlstore.Migrate(ctx(t), db)
	if err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	if fmt.Sprint(applied) != fmt.Sprint(want) {
		t.Fatalf("migrate up applied %v, want %v", applied, want)
	}
}

func status(t *testing.T, db *bun.DB, applied, pending []string) {
	t.Helper()
	st, err := mysqlstore.Status(ctx(t), db)
	if err != nil {
		t.Fatalf("migration status: %v", err)
	}
	if fmt.Sprint(st.Applied) != fmt.Sprint(applied) || fmt.Sprint(st.Pending) != fmt.Sprint(pending) {
		t.Fatalf("migration status:\n%s\nwant applied %v, pending %v", st, applied, pending)
	}
}

func tablesExist(t *testing.T, db *bun.DB, want bool) {
	t.Helper()
	for _, table := range []string{"tb_voucher", "tb_seckill_voucher", "tb_voucher_order", "tb_voucher_order_failure", "tb_voucher_creation", "tb_deployment"} {
		var n int
		err := db.NewSelect().Table(table).ColumnExpr("COUNT(*)").Scan(ctx(t), &n)
		if exists := err == nil; exists != want {
			t.Fatalf("table %s exists: %v (%v), want %v", table, exists, err, want)
		}
	}
}

// migrated connects to a fresh database and migrates it.
func migrated(t *testing.T, connect func(*testing.T) *bun.DB) (*bun.DB, repos) {
	t.Helper()
	db := connect(t)
	return db, reposOn(t, db)
}

var sqlCases = []struct {
	name string
	run  func(t *testing.T, connect func(*testing.T) *bun.DB)
}{
	{"a_batch_of_new_orders_is_written_without_reading_the_order_tables", func(t *testing.T, connect func(*testing.T) *bun.DB) {
		db, s := migrated(t, connect)
		v := add(t, s, 1, 10)
		seen := &statements{}
		db.AddQueryHook(seen)
		var orders []domain.VoucherOrder
		for i := 1; i <= 5; i++ {
			orders = append(orders, testenv.Order(t, domain.OrderID(i), domain.UserID(i), v.ID()))
		}
		if _, err := s.orders.CreateBatch(ctx(t), orders); err != nil {
			t.Fatal(err)
		}
		if n := seen.reading("tb_voucher_order"); n != 0 {
			t.Fatalf("a batch of new orders read tb_voucher_order %d times, want 0 (the insert's keys tell they are new):\n%s", n, seen)
		}
		stockIs(t, s, v.ID(), 5)
		// A redelivery of one of them is read (and recorded as it was).
		if _, err := s.orders.CreateBatch(ctx(t), orders[:1]); err != nil {
			t.Fatal(err)
		}
		if n := seen.reading("tb_voucher_order"); n == 0 {
			t.Fatalf("a redelivered order was not looked up:\n%s", seen)
		}
		stockIs(t, s, v.ID(), 5)
	}},
	// The batch's INSERT is written by hand (insertOrders): its row must be
	// what the model says, on each dialect, through both of its callers.
	{"a_created_order_row_holds_every_column_of_an_unpaid_order", func(t *testing.T, connect func(*testing.T) *bun.DB) {
		db, s := migrated(t, connect)
		const window = 15 * time.Minute
		orders := mysqlstore.NewOrderRepo(db).WithPayWindow(window)
		v := add(t, s, 1, 10)
		id := func(seq uint32) domain.OrderID {
			id, err := domain.NewOrderID(time.Now(), seq)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		first := testenv.Order(t, id(1), 11, v.ID())
		second := testenv.Order(t, id(2), 12, v.ID())
		if _, err := orders.CreateBatch(ctx(t), []domain.VoucherOrder{first}); err != nil {
			t.Fatal(err)
		}
		// A redelivery beside a new order: the planned path's insert.
		if _, err := orders.CreateBatch(ctx(t), []domain.VoucherOrder{first, second}); err != nil {
			t.Fatal(err)
		}
		for _, o := range []domain.VoucherOrder{first, second} {
			var row struct {
				ID, UserID, VoucherID int64
				Status                int
				PayDeadline           sql.NullTime
				CancelReason          sql.NullString
				TransactionID         sql.NullString
				PayTime               sql.NullTime
				Returned              bool
			}
			err := db.NewSelect().Table("tb_voucher_order").
				Column("id", "user_id", "voucher_id", "status", "pay_deadline", "cancel_reason", "transaction_id", "pay_time", "returned").
				Where("id = ?", int64(o.ID())).Scan(ctx(t), &row.ID, &row.UserID, &row.VoucherID, &row.Status,
				&row.PayDeadline, &row.CancelReason, &row.TransactionID, &row.PayTime, &row.Returned)
			if err != nil {
				t.Fatal(err)
			}
			want := domain.PayDeadline(o.ID(), window).UTC().Truncate(time.Microsecond)
			if row.ID != int64(o.ID()) || row.UserID != int64(o.UserID()) || row.VoucherID != int64(o.VoucherID()) || row.Status != 1 ||
				!row.PayDeadline.Valid || !row.PayDeadline.Time.Equal(want) ||
				row.CancelReason.Valid || row.TransactionID.Valid || row.PayTime.Valid || row.Returned {
				t.Fatalf("order %d: row %+v, want an unpaid order of user %d paying by %v", o.ID(), row, o.UserID(), want)
			}
		}
		stockIs(t, s, v.ID(), 8)
	}},
	{"migrate_up_status_down_up", func(t *testing.T, connect func(*testing.T) *bun.DB) {
		db := connect(t)
		status(t, db, nil, migrations)
		migrateUp(t, db, migrations...)
		status(t, db, migrations, nil)
		migrateUp(t, db) // nothing left to do
		tablesExist(t, db, true)
		s := reposOn(t, db)
		v := add(t, s, 1, 1)

		// One migration per down, newest first (forced: the voucher's rows go).
		for i := len(migrations) - 1; i >= 0; i-- {
			rolled, err := mysqlstore.Rollback(ctx(t), db, true)
			if err != nil || fmt.Sprint(rolled) != fmt.Sprint(migrations[i:i+1]) {
				t.Fatalf("migrate down: rolled back %v (err %v), want %v", rolled, err, migrations[i:i+1])
			}
			status(t, db, migrations[:i], migrations[i:])
		}
		tablesExist(t, db, false)
		if rolled, err := mysqlstore.Rollback(ctx(t), db, false); err != nil || len(rolled) != 0 {
			t.Fatalf("second migrate down: rolled back %v (err %v), want nothing", rolled, err)
		}

		migrateUp(t, db, migrations...)
		tablesExist(t, db, true)
		if _, err := s.vouchers.Get(ctx(t), v.ID()); err == nil {
			t.Fatal("a voucher survived down and up")
		}
		w := add(t, s, 1, 1)
		o := testenv.Order(t, 1, 1, w.ID())
		if out, err := s.orders.CreateBatch(ctx(t), []domain.VoucherOrder{o}); err != nil || len(out) != 1 ||
			out[0] != (domain.Outcome{Order: o, State: domain.OrderCreated, New: true}) {
			t.Fatalf("an order after down and up: %+v, %v; want it created", out, err)
		}
	}},
	{"concurrent_starts_migrate_once", func(t *testing.T, connect func(*testing.T) *bun.DB) {
		const instances = 4
		dbs := make([]*bun.DB, instances)
		for i := range dbs {
			dbs[i] = connect(t)
		}
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			applied = make([][]string, instances)
			errs    = make([]error, instances)
		)
		for i, db := range dbs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				applied[i], errs[i] = mysqlstore.Migrate(ctx(t), db)
			}()
		}
		close(start)
		wg.Wait()
		ran := 0
		for i := range dbs {
			if errs[i] != nil {
				t.Fatalf("instance %d: migrate: %v", i, errs[i])
			}
			if len(applied[i]) > 0 {
				ran++
			}
		}
		if ran != 1 {
			t.Fatalf("%d instances applied migrations (%v), want exactly 1", ran, applied)
		}
		status(t, dbs[0], migrations, nil)
	}},
	{"times_are_stored_in_utc", func(t *testing.T, connect func(*testing.T) *bun.DB) {
		db, s := migrated(t, connect)
		begin := testenv.Now().In(zone).Add(123456789)
		v := addSale(t, s, domain.VoucherSpec{ShopID: 1, Title: "utc"}, 1, begin, begin.Add(time.Hour))
		var stored, created string
		err := db.NewRaw("SELECT CAST(sv.begin_time AS CHAR), CAST(v.create_time AS CHAR) "+
			"FROM tb_seckill_voucher AS sv JOIN tb_voucher AS v ON v.id = sv.voucher_id WHERE sv.voucher_id = ?",
			int64(v.ID())).Scan(ctx(t), &stored, &created)
		if err != nil {
			t.Fatal(err)
		}
		if want := begin.UTC().Format("2006-01-02 15:04:05.000000"); !strings.HasPrefix(stored, want) {
			t.Fatalf("begin_time stored as %q, want the UTC %q", stored, want)
		}
		// The column default, not our code, writes create_time: it must be
		// UTC too, whatever the server's zone.
		at, err := time.Parse(time.DateTime, created[:len(time.DateTime)])
		if err != nil {
			t.Fatalf("create_time %q: %v", created, err)
		}
		if d := time.Since(at); d < -5*time.Minute || d > 5*time.Minute {
			t.Fatalf("create_time %q is %s away from now in UTC", created, d)
		}
	}},
	{"schema_refuses_negative_stock", func(t *testing.T, connect func(*testing.T) *bun.DB) {
		db, s := migrated(t, connect)
		v := add(t, s, 1, 1)
		if _, err := db.NewRaw("UPDATE tb_seckill_voucher SET stock = stock - 2 WHERE voucher_id = ?", int64(v.ID())).
			Exec(ctx(t)); err == nil {
			t.Fatal("the schema let stock go below zero")
		}
		stockIs(t, s, v.ID(), 1)
	}},
	{"schema_refuses_second_order_of_a_user", func(t *testing.T, connect func(*testing.T) *bun.DB) {
		db, s := migrated(t, connect)
		v := add(t, s, 1, 5)
		insert := "INSERT INTO tb_voucher_order (id, user_id, voucher_id) VALUES (?, ?, ?)"
		if _, err := db.NewRaw(insert, 1, 7, int64(v.ID())).Exec(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.NewRaw(insert, 2, 7, int64(v.ID())).Exec(ctx(t)); err == nil {
			t.Fatal("the schema let a user hold two orders of one voucher")
		}
		if _, err := db.NewRaw(insert, 1, 8, int64(v.ID())).Exec(ctx(t)); err == nil {
			t.Fatal("the schema let two orders share an id")
		}
	}},
	// The limit per user in the database itself: a user's orders holding a
	// place each hold their own slot, so a place too many finds its slot
	// taken whatever the code did. Rows written as hmdp writes them (no
	// slot) hold slot 1: the one-order rule above.
	{"schema_refuses_a_place_in_a_used_slot", func(t *testing.T, connect func(*testing.T) *bun.DB) {
		db, s := migrated(t, connect)
		v := add(t, s, 1, 5)
		insert := func(id, user int64, slot ...int) error {
			if len(slot) == 0 {
				_, err := db.NewRaw("INSERT INTO tb_voucher_order (id, user_id, voucher_id) VALUES (?, ?, ?)", id, user, int64(v.ID())).Exec(ctx(t))
				return err
			}
			_, err := db.NewRaw("INSERT INTO tb_voucher_order (id, user_id, voucher_id, slot) VALUES (?, ?, ?, ?)", id, user, int64(v.ID()), slot[0]).Exec(ctx(t))
			return err
		}
		for _, row := range [][3]int64{{1, 7, 1}, {2, 7, 2}, {3, 8, 2}} {
			if err := insert(row[0], row[1], int(row[2])); err != nil {
				t.Fatalf("order %d of user %d in slot %d: %v", row[0], row[1], row[2], err)
			}
		}
		for _, slot := range []int{1, 2} {
			if err := insert(10+int64(slot), 7, slot); err == nil {
				t.Fatalf("the schema let user 7 hold slot %d twice", slot)
			}
		}
		if err := insert(13, 7); err == nil {
			t.Fatal("the schema let a row without a slot take user 7's slot 1")
		}
		for _, slot := range []int{0, 11} {
			if err := insert(20+int64(slot), 9, slot); err == nil {
				t.Fatalf("the schema let an order hold slot %d", slot)
			}
		}
		// A forfeited place keeps its slot; a reclaimable one frees it.
		if _, err := db.NewRaw("UPDATE tb_voucher_order SET status = 4, reclaimable = 0 WHERE id = 1").Exec(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if err := insert(14, 7, 1); err == nil {
			t.Fatal("the schema let a forfeited place's slot be taken again")
		}
		if _, err := db.NewRaw("UPDATE tb_voucher_order SET reclaimable = 1 WHERE id = 1").Exec(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if err := insert(15, 7); err != nil {
			t.Fatalf("a reclaimed place's slot 1: %v", err)
		}
	}},
}

func TestSchemaAndMigrations(t *testing.T) {
	for _, b := range sqlBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			newDatabase := b.open(t)
			for _, tc := range sqlCases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, newDatabase(t)) })
			}
		})
	}
}

func TestOpenSQLiteCreatesDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "nested", "seckill.db")
	db := openSQLite(t, path)
	migrateUp(t, db, migrations...)
	var mode string
	if err := db.NewRaw("PRAGMA journal_mode").Scan(ctx(t), &mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q (err %v), want wal", mode, err)
	}
	var fk int
	if err := db.NewRaw("PRAGMA foreign_keys").Scan(ctx(t), &fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys = %d (err %v), want 1", fk, err)
	}
}

func TestOpenMySQLCreatesDatabase(t *testing.T) {
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName += "_fresh"
	// parseTime and loc are forced by OpenMySQL: a DSN without them must work.
	cfg.ParseTime = false
	admin := cfg.Clone()
	admin.DBName = ""
	adminDB, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = adminDB.Exec("DROP DATABASE IF EXISTS `" + cfg.DBName + "`")
		_ = adminDB.Close()
	})

	db := openMySQL(t, cfg.FormatDSN())
	migrateUp(t, db, migrations...)
	s := reposOn(t, db)
	v := add(t, s, 1, 1)
	sameVoucher(t, get(t, s, v.ID()), v)
}

// statements records the SQL a database ran (a bun query hook).
type statements struct {
	mu  sync.Mutex
	sql []string
}

func (s *statements) BeforeQuery(c context.Context, _ *bun.QueryEvent) context.Context { return c }

func (s *statements) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sql = append(s.sql, e.Query)
}

// reading counts the SELECTs from table (not from tables whose name it
// merely begins).
func (s *statements) reading(table string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.sql {
		if !strings.HasPrefix(q, "SELECT") {
			continue
		}
		for _, quoted := range []string{"`" + table + "`", `"` + table + `"`} {
			if strings.Contains(q, "FROM "+quoted+" ") || strings.HasSuffix(q, "FROM "+quoted) {
				n++
			}
		}
	}
	return n
}

func (s *statements) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.sql, "\n")
}
