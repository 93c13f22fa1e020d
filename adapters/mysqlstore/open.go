// Package mysqlstore is the database adapter: Bun repositories over
// MySQL/MariaDB, embedded migrations, and opening a database. The embedded
// default runs the same code on SQLite; the few statements where the dialects
// differ switch on the dialect's name. Every time is stored in UTC.
package mysqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"

	// Registers the "sqlite" driver: pure Go, so the embedded default needs no cgo.
	_ "modernc.org/sqlite"
)

// openTimeout bounds the checks made while opening, so a server that does not
// answer fails the start instead of hanging it.
const openTimeout = 10 * time.Second

// OpenMySQL connects to the database the DSN names, creating it if the server
// does not have it. Whatever the DSN says, times are parsed and written as UTC.
func OpenMySQL(dsn string) (*bun.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse MySQL DSN: %w", err)
	}
	if cfg.DBName == "" {
		return nil, errors.New("MySQL DSN names no database (expected user@tcp(host:port)/dbname)")
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	// DEFAULT CURRENT_TIMESTAMP follows the session zone; without this the
	// audit columns would be in the server's local time while ours are UTC.
	cfg.Params["time_zone"] = "'+00:00'"
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
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
	// The dialect formats the times Bun inlines into queries; it must agree
	// with the driver's loc, or a non-UTC time would be stored as local time.
	return bun.NewDB(sqldb, mysqldialect.New(mysqldialect.WithTimeLocation("UTC"))), nil
}

func openMySQLPool(ctx context.Context, cfg *mysql.Config) (*sql.DB, error) {
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	sqldb := sql.OpenDB(connector)
	// Enough for several fulfilment workers plus status reads, without
	// hogging a server shared by instances.
	sqldb.SetMaxOpenConns(32)
	sqldb.SetMaxIdleConns(16)
	// Below the server's wait_timeout (often lowered by proxies), so the pool
	// does not hand out connections the server closed.
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

// OpenSQLite opens (creating it and its directory if needed) the SQLite file
// the embedded default runs on.
func OpenSQLite(path string) (*bun.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create directory for SQLite database: %w", err)
	}
	q := url.Values{}
	// busy_timeout first, so the switch to WAL waits for another connection
	// instead of failing. WAL lets readers run beside the one writer.
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	// A deferred transaction's upgrade from read to write fails SQLITE_BUSY
	// without waiting; IMMEDIATE takes the write lock up front, where
	// busy_timeout applies.
	q.Set("_txlock", "immediate")
	sqldb, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open SQLite database %s: %w", path, err)
	}
	// SQLite has one writer; more connections would only queue on its lock.
	sqldb.SetMaxOpenConns(4)
	sqldb.SetMaxIdleConns(4)
	sqldb.SetConnMaxLifetime(0)
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	if err := sqldb.PingContext(ctx); err != nil {
		_ = sqldb.Close()
		return nil, fmt.Errorf("open SQLite database %s: %w", path, err)
	}
	return bun.NewDB(sqldb, sqlitedialect.New()), nil
}

// DeploymentID returns the database's deployment identity, a random id in
// tb_deployment's one row; of instances starting at once, the first insert
// wins and every one reads the winner's.
func DeploymentID(ctx context.Context, db bun.IDB) (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("deployment id: %w", err)
	}
	insert := "INSERT IGNORE INTO tb_deployment (id, deployment_id) VALUES (1, ?)"
	if db.Dialect().Name() == dialect.SQLite {
		insert = "INSERT OR IGNORE INTO tb_deployment (id, deployment_id) VALUES (1, ?)"
	}
	if _, err := db.NewRaw(insert, hex.EncodeToString(b)).Exec(ctx); err != nil {
		return "", fmt.Errorf("write the deployment id (tb_deployment; is the database migrated?): %w", err)
	}
	var id string
	if err := db.NewRaw("SELECT deployment_id FROM tb_deployment WHERE id = 1").Scan(ctx, &id); err != nil {
		return "", fmt.Errorf("read the deployment id: %w", err)
	}
	return id, nil
}
