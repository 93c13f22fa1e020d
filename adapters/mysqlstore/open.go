// Package mysqlstore is the database adapter: Bun repositories over MySQL/MariaDB, embedded
// migrations, and opening a database. The embedded default runs the same code on SQLite; where the
// dialects differ the code switches on the dialect's name. Every time is stored in UTC.
package mysqlstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"modernc.org/sqlite" // also registers the "sqlite" driver: pure Go, so the embedded default needs no cgo

	"github.com/hmdp-go/seckill/ports"
)

// openTimeout bounds the checks made while opening, so a silent server fails the start, not hangs it.
const openTimeout = 10 * time.Second

// OpenMySQL connects to the database the DSN names, creating it if the server does not have it.
// Whatever the DSN says, times are parsed and written as UTC.
func OpenMySQL(dsn string) (*bun.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse MySQL DSN: %w", err)
	}
	if cfg.DBName == "" {
		return nil, errors.New("MySQL DSN names no database (expected user@tcp(host:port)/dbname)")
	}
	cfg.ParseTime, cfg.Loc = true, time.UTC
	cfg.Timeout = cmp.Or(cfg.Timeout, 5*time.Second)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	// DEFAULT CURRENT_TIMESTAMP follows the session zone: the audit columns must be UTC like ours.
	cfg.Params["time_zone"] = "'+00:00'"
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	sqldb, err := openMySQLPool(ctx, cfg)
	if my, _ := codes(err); my == mysqlUnknownDatabase {
		if err := createDatabase(ctx, cfg); err != nil {
			return nil, err
		}
		sqldb, err = openMySQLPool(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to MySQL at %s: %w", cfg.Addr, err)
	}
	// The dialect formats the times Bun inlines into queries: it must agree with the driver's loc.
	return bun.NewDB(sqldb, mysqldialect.New(mysqldialect.WithTimeLocation("UTC"))), nil
}

func openMySQLPool(ctx context.Context, cfg *mysql.Config) (*sql.DB, error) {
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	sqldb := sql.OpenDB(connector)
	// Enough for several fulfilment workers plus status reads, without hogging a shared server.
	sqldb.SetMaxOpenConns(32)
	sqldb.SetMaxIdleConns(16)
	// Below the server's wait_timeout (often lowered by proxies), so no connection it closed is handed out.
	sqldb.SetConnMaxLifetime(30 * time.Minute)
	sqldb.SetConnMaxIdleTime(5 * time.Minute)
	if err := sqldb.PingContext(ctx); err != nil {
		_ = sqldb.Close()
		return nil, err
	}
	return sqldb, nil
}

func createDatabase(ctx context.Context, cfg *mysql.Config) error {
	admin := cfg.Clone()
	admin.DBName = ""
	connector, err := mysql.NewConnector(admin)
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	name := "`" + strings.ReplaceAll(cfg.DBName, "`", "``") + "`"
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+name+
		" CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"); err != nil {
		return fmt.Errorf("create database %s on %s: %w", name, cfg.Addr, err)
	}
	return nil
}

// OpenSQLite opens (creating it and its directory if needed) the SQLite file the embedded default runs on.
func OpenSQLite(path string) (*bun.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create directory for SQLite database: %w", err)
	}
	// busy_timeout first, so the switch to WAL waits for another connection instead of failing.
	q := url.Values{"_pragma": {"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)"}}
	// A deferred transaction's upgrade to write fails SQLITE_BUSY at once; IMMEDIATE waits busy_timeout.
	q.Set("_txlock", "immediate")
	sqldb, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open SQLite database %s: %w", path, err)
	}
	// SQLite has one writer; more connections would only queue on its lock.
	sqldb.SetMaxOpenConns(4)
	sqldb.SetMaxIdleConns(4)
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	if err := sqldb.PingContext(ctx); err != nil {
		_ = sqldb.Close()
		return nil, fmt.Errorf("open SQLite database %s: %w", path, err)
	}
	return bun.NewDB(sqldb, sqlitedialect.New()), nil
}

// insertIgnore is db's dialect's INSERT that skips rows whose keys exist.
func insertIgnore(db bun.IDB) string {
	if db.Dialect().Name() == dialect.SQLite {
		return "INSERT OR IGNORE"
	}
	return "INSERT IGNORE"
}

// DeploymentID returns the database's deployment identity, a random id in tb_deployment's one row;
// of instances starting at once, the first insert wins and every one reads the winner's.
func DeploymentID(ctx context.Context, db bun.IDB) (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("deployment id: %w", err)
	}
	insert := insertIgnore(db) + " INTO tb_deployment (id, deployment_id) VALUES (1, ?)"
	if _, err := db.NewRaw(insert, hex.EncodeToString(b)).Exec(ctx); err != nil {
		return "", fmt.Errorf("write the deployment id (tb_deployment; is the database migrated?): %w", err)
	}
	var id string
	if err := db.NewRaw("SELECT deployment_id FROM tb_deployment WHERE id = 1").Scan(ctx, &id); err != nil {
		return "", fmt.Errorf("read the deployment id: %w", err)
	}
	return id, nil
}

// ErrTransient marks a failure that says nothing about the data (a lost connection, a deadlock,
// a busy SQLite file): nothing was committed and the same call may be retried.
var ErrTransient = errors.New("transient database error")

// MySQL server error numbers.
const (
	mysqlLockWaitTimeout = 1205
	mysqlDeadlock        = 1213
	mysqlDuplicateEntry  = 1062
	mysqlUnknownDatabase = 1049
)

// mysqlRetryable adds to the lock conflicts too many connections, a shutdown and a read-only server.
var mysqlRetryable = []uint16{mysqlLockWaitTimeout, mysqlDeadlock, 1040, 1053, 1290, 1792}

// mysqlDataErrors refuse the data itself (NOT NULL, foreign key, range, length, CHECK...). Unknown
// errors stay retried: failing an order that would have landed is worse than retrying.
var mysqlDataErrors = []uint16{1048, 1216, 1217, 1264, 1265, 1292, 1364, 1366, 1406, 1451, 1452, 3819, 4025}

// SQLite result codes (modernc reports extended codes; the primary code is the low byte).
const (
	sqliteBusy             = 5
	sqliteLocked           = 6
	sqliteTooBig           = 18
	sqliteConstraint       = 19
	sqliteMismatch         = 20
	sqliteConstraintUnique = 2067
	sqliteConstraintPK     = 1555
)

// wrap names the operation and marks transient failures with ErrTransient, data refusals with ports.ErrPermanent.
func wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case isTransient(err):
		return fmt.Errorf("%s: %w: %w", op, ErrTransient, err)
	case isPermanent(err):
		return fmt.Errorf("%s: %w: %w", op, ports.ErrPermanent, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isPermanent leaves out duplicate keys: an unexpected one is a race worth retrying.
func isPermanent(err error) bool {
	my, lite := codes(err)
	switch lite & 0xff {
	case sqliteTooBig, sqliteMismatch:
		return true
	case sqliteConstraint:
		return !isDuplicateKey(err)
	}
	return slices.Contains(mysqlDataErrors, my)
}

func isTransient(err error) bool {
	switch my, lite := codes(err); {
	case my != 0:
		return slices.Contains(mysqlRetryable, my)
	case lite != 0:
		return lite&0xff == sqliteBusy || lite&0xff == sqliteLocked
	}
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.As(err, &ne)
}

func isDuplicateKey(err error) bool {
	my, lite := codes(err)
	return my == mysqlDuplicateEntry || lite == sqliteConstraintUnique || lite == sqliteConstraintPK
}

// codes are the MySQL error number and the SQLite result code err carries (0: none).
func codes(err error) (my uint16, lite int) {
	var me *mysql.MySQLError
	var se *sqlite.Error
	switch {
	case errors.As(err, &me):
		return me.Number, 0
	case errors.As(err, &se):
		return 0, se.Code()
	}
	return 0, 0
}
