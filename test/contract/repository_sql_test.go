package contract_test

import (
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

// The schema and its migrations, on both SQL dialects: what the repository
// contract cannot see from the ports.

type repoSQLBackend struct {
	name string
	// open checks the backend once (it may skip) and returns a factory of
	// fresh, unmigrated databases. Each database comes as connect, which opens
	// another pool on it, as another instance of the service would.
	open func(t *testing.T) func(t *testing.T) (connect func(t *testing.T) *bun.DB)
}

func repoSQLBackends() []repoSQLBackend {
	return []repoSQLBackend{
		{name: "sqlite", open: func(*testing.T) func(*testing.T) func(*testing.T) *bun.DB {
			return func(t *testing.T) func(*testing.T) *bun.DB {
				path := testenv.SQLitePath(t)
				return func(t *testing.T) *bun.DB { return repoOpenSQLite(t, path) }
			}
		}},
		{name: "mysql", open: func(t *testing.T) func(*testing.T) func(*testing.T) *bun.DB {
			testenv.MySQLDSN(t)
			return func(t *testing.T) func(*testing.T) *bun.DB {
				dsn := testenv.MySQLDSN(t)
				return func(t *testing.T) *bun.DB { return repoOpenMySQL(t, dsn) }
			}
		}},
	}
}

// repoMigrations are every migration, in order; a fresh database applies
// them as one group, and one rollback undoes that group.
var repoMigrations = []string{"20250101000001_create_seckill_tables", "20261201000001_create_voucher_creation"}

func repoMigrate(t *testing.T, db *bun.DB, want ...string) {
	t.Helper()
	applied, err := mysqlstore.Migrate(repoCtx(t), db)
	if err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	if fmt.Sprint(applied) != fmt.Sprint(want) {
		t.Fatalf("migrate up applied %v, want %v", applied, want)
	}
}

func repoStatus(t *testing.T, db *bun.DB, applied, pending []string) {
	t.Helper()
	st, err := mysqlstore.Status(repoCtx(t), db)
	if err != nil {
		t.Fatalf("migration status: %v", err)
	}
	if fmt.Sprint(st.Applied) != fmt.Sprint(applied) || fmt.Sprint(st.Pending) != fmt.Sprint(pending) {
		t.Fatalf("migration status:\n%s\nwant applied %v, pending %v", st, applied, pending)
	}
}

func repoTablesExist(t *testing.T, db *bun.DB, want bool) {
	t.Helper()
	for _, table := range []string{"tb_voucher", "tb_seckill_voucher", "tb_voucher_order", "tb_voucher_order_failure", "tb_voucher_creation"} {
		var n int
		err := db.NewSelect().Table(table).ColumnExpr("COUNT(*)").Scan(repoCtx(t), &n)
		if exists := err == nil; exists != want {
			t.Fatalf("table %s exists: %v (%v), want %v", table, exists, err, want)
		}
	}
}

// repoMigrated connects to a fresh database and migrates it.
func repoMigrated(t *testing.T, connect func(*testing.T) *bun.DB) (*bun.DB, repoSubject) {
	t.Helper()
	db := connect(t)
	return db, repoSQLSubject(t, db)
}

var repoSQLCases = []struct {
	name string
	run  func(t *testing.T, connect func(*testing.T) *bun.DB)
}{
	{"migrate_up_status_down_up", func(t *testing.T, connect func(*testing.T) *bun.DB) {
		db := connect(t)
		repoStatus(t, db, nil, repoMigrations)
		repoMigrate(t, db, repoMigrations...)
		repoStatus(t, db, repoMigrations, nil)
		repoMigrate(t, db) // nothing left to do
		repoTablesExist(t, db, true)
		s := repoSQLSubject(t, db)
		v := repoAdd(t, s, 1, 1)

		rolled, err := mysqlstore.Rollback(repoCtx(t), db)
		if err != nil || fmt.Sprint(rolled) != fmt.Sprint(repoMigrations) {
			t.Fatalf("migrate down: rolled back %v (err %v), want %v", rolled, err, repoMigrations)
		}
		repoTablesExist(t, db, false)
		repoStatus(t, db, nil, repoMigrations)
		if rolled, err := mysqlstore.Rollback(repoCtx(t), db); err != nil || len(rolled) != 0 {
			t.Fatalf("second migrate down: rolled back %v (err %v), want nothing", rolled, err)
		}

		repoMigrate(t, db, repoMigrations...)
		repoTablesExist(t, db, true)
		if _, err := s.vouchers.Get(repoCtx(t), v.ID()); err == nil {
			t.Fatal("a voucher survived down and up")
		}
		w := repoAdd(t, s, 1, 1)
		o := testenv.Order(t, 1, 1, w.ID())
		repoExpect(t, repoBatch(t, s, o), []domain.VoucherOrder{o}, "created")
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
				applied[i], errs[i] = mysqlstore.Migrate(repoCtx(t), db)
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
		repoStatus(t, dbs[0], repoMigrations, nil)
	}},
	{"times_are_stored_in_utc", func(t *testing.T, connect func(*testing.T) *bun.DB) {
		db, s := repoMigrated(t, connect)
		begin := time.Date(2026, 11, 29, 20, 0, 0, 123456789, repoZone)
		v := repoAddSale(t, s, domain.VoucherSpec{ShopID: 1, Title: "utc"}, repoSale(t, 1, begin, begin.Add(time.Hour)))
		var stored, created string
		err := db.NewRaw("SELECT CAST(sv.begin_time AS CHAR), CAST(v.create_time AS CHAR) "+
			"FROM tb_seckill_voucher AS sv JOIN tb_voucher AS v ON v.id = sv.voucher_id WHERE sv.voucher_id = ?",
			int64(v.ID())).Scan(repoCtx(t), &stored, &created)
		if err != nil {
			t.Fatal(err)
		}
		if want := "2026-11-29 12:00:00.123456"; !strings.HasPrefix(stored, want) {
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
		db, s := repoMigrated(t, connect)
		v := repoAdd(t, s, 1, 1)
		if _, err := db.NewRaw("UPDATE tb_seckill_voucher SET stock = stock - 2 WHERE voucher_id = ?", int64(v.ID())).
			Exec(repoCtx(t)); err == nil {
			t.Fatal("the schema let stock go below zero")
		}
		repoStock(t, s, v.ID(), 1)
	}},
	{"schema_refuses_second_order_of_a_user", func(t *testing.T, connect func(*testing.T) *bun.DB) {
		db, s := repoMigrated(t, connect)
		v := repoAdd(t, s, 1, 5)
		insert := "INSERT INTO tb_voucher_order (id, user_id, voucher_id) VALUES (?, ?, ?)"
		if _, err := db.NewRaw(insert, 1, 7, int64(v.ID())).Exec(repoCtx(t)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.NewRaw(insert, 2, 7, int64(v.ID())).Exec(repoCtx(t)); err == nil {
			t.Fatal("the schema let a user hold two orders of one voucher")
		}
		if _, err := db.NewRaw(insert, 1, 8, int64(v.ID())).Exec(repoCtx(t)); err == nil {
			t.Fatal("the schema let two orders share an id")
		}
	}},
}

func TestRepositorySQLSchema(t *testing.T) {
	for _, b := range repoSQLBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			newDatabase := b.open(t)
			for _, tc := range repoSQLCases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, newDatabase(t)) })
			}
		})
	}
}

func TestRepositoryOpenSQLiteCreatesDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "nested", "seckill.db")
	db := repoOpenSQLite(t, path)
	repoMigrate(t, db, repoMigrations...)
	var mode string
	if err := db.NewRaw("PRAGMA journal_mode").Scan(repoCtx(t), &mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q (err %v), want wal", mode, err)
	}
	var fk int
	if err := db.NewRaw("PRAGMA foreign_keys").Scan(repoCtx(t), &fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys = %d (err %v), want 1", fk, err)
	}
}

func TestRepositoryOpenMySQLCreatesDatabase(t *testing.T) {
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

	db := repoOpenMySQL(t, cfg.FormatDSN())
	repoMigrate(t, db, repoMigrations...)
	s := repoSQLSubject(t, db)
	v := repoAdd(t, s, 1, 1)
	repoSameVoucher(t, repoGet(t, s, v.ID()), v)
}
