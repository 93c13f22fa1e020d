package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/domain"
)

// referenceVoucher is the one voucher a reference sells.
const referenceVoucher domain.VoucherID = 1

// referenceSchema is the fullpipe's tables, fixed here so the reference does
// not move with the service's migrations: tb_voucher_order as the service
// has it today (every column, its unique and voucher index), the stock row,
// and an empty failure table so the books are read as in every mode.
var referenceSchema = []string{
	`CREATE TABLE tb_seckill_voucher (
		voucher_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
		stock INT NOT NULL,
		CONSTRAINT ck_stock CHECK (stock >= 0)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`,
	`CREATE TABLE tb_voucher_order (
		id BIGINT NOT NULL,
		user_id BIGINT UNSIGNED NOT NULL,
		voucher_id BIGINT UNSIGNED NOT NULL,
		pay_type TINYINT UNSIGNED NOT NULL DEFAULT 1,
		status TINYINT UNSIGNED NOT NULL DEFAULT 1,
		create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
		pay_time DATETIME NULL,
		use_time DATETIME NULL,
		refund_time DATETIME NULL,
		update_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
		PRIMARY KEY (id),
		UNIQUE KEY uk_user_voucher (user_id, voucher_id),
		KEY idx_voucher_id (voucher_id)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`,
	`CREATE TABLE tb_voucher_order_failure (
		id BIGINT NOT NULL PRIMARY KEY,
		voucher_id BIGINT UNSIGNED NOT NULL,
		KEY idx_voucher_id (voucher_id)
	) ENGINE=InnoDB`,
}

// runReference runs bare or fullpipe as a child process over the scenario's
// workload and, for fullpipe, waits until every order is in MySQL and
// checks the books.
func (e *env) runReference(ctx context.Context, sc Scenario, m Mode, r *Result) (err error) {
	switch {
	case e.embeddedRedis:
		return unavailable("the fixed references run in a process of their own against a real Redis (set SECKILL_REDIS_URL)")
	case m == ModeFullpipe && e.embeddedDB:
		return unavailable("fullpipe writes MySQL (set SECKILL_MYSQL_DSN)")
	case e.opts.ReferenceBinary == "":
		return unavailable("no seckill-bench binary to run the reference in")
	}
	space, err := e.newSpace(sc, m)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, space.cleanup()) }()
	w, stock, err := e.loggedInSale(ctx, space, sc, r)
	if err != nil {
		return err
	}
	if err := e.rdb.Set(ctx, fmt.Sprintf("%sstock:%d", space.prefix, referenceVoucher), stock, 0).Err(); err != nil {
		return err
	}
	var db *bun.DB
	if m == ModeFullpipe {
		if db, err = openReferenceDB(ctx, space.dsn, stock); err != nil {
			return err
		}
		defer db.Close()
	}
	usersFile := filepath.Join(e.tmp, "reference-"+space.name+".users")
	var buf bytes.Buffer
	for i, t := range w.tokens {
		fmt.Fprintf(&buf, "%s %d\n", t, w.users[i])
	}
	if err := os.WriteFile(usersFile, buf.Bytes(), 0o600); err != nil {
		return err
	}
	defer os.Remove(usersFile)
	ch, base, err := e.startReference(ctx, space, m, usersFile)
	if err != nil {
		return err
	}
	defer ch.kill()
	e.childPID.Store(int64(ch.cmd.Process.Pid))
	defer e.childPID.Store(0)

	out, err := e.drive(ctx, e.runName(r.Scenario, r.Mode, r.Round), w, base, referenceVoucher, nil)
	if err != nil {
		return err
	}
	r.fromLoad(out)
	var (
		lastAt  time.Time
		drained bool
	)
	if db != nil {
		if lastAt, drained, err = waitSettled(ctx, db, referenceVoucher, out.successes, e.opts.DrainTimeout); err != nil {
			return err
		}
	}
	e.settle(r, out)
	var idb bun.IDB
	if db != nil {
		idb = db
	}
	b, err := check(ctx, idb, referenceVoucher, stock, out.won)
	if err != nil {
		return err
	}
	r.Books = &b
	if db != nil {
		r.setDrain(out, lastAt, b.Created, drained)
		r.noteUndrained()
	}
	if err := ch.stop(); err != nil {
		r.note("stopping the reference: %v", err)
	}
	if f := referenceFailures(ch.tail()); f > 0 {
		r.note("the reference's consumer retried %d times (Redis or MySQL errors)", f)
	}
	return nil
}

// loggedInSale is the scenario's workload with every user logged in (their
// tokens minted in Redis and owned by space, which deletes them).
func (e *env) loggedInSale(ctx context.Context, space *runSpace, sc Scenario, r *Result) (*workload, int, error) {
	users, stock, maxPer := e.sale(sc)
	r.Users, r.Stock = users, stock
	w := newWorkload(users, maxPer, e.opts.Seed)
	if err := w.mint(ctx, e.rdb); err != nil {
		return nil, 0, err
	}
	space.tokens = w.tokens
	return w, stock, nil
}

// openReferenceDB creates the run's database with the reference's fixed
// tables and its voucher's stock row.
func openReferenceDB(ctx context.Context, dsn string, stock int) (*bun.DB, error) {
	db, err := mysqlstore.OpenMySQL(dsn) // creates the database
	if err != nil {
		return nil, err
	}
	for _, q := range referenceSchema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, errors.Join(fmt.Errorf("reference schema: %w", err), db.Close())
		}
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO tb_seckill_voucher (voucher_id, stock) VALUES (?, ?)", int64(referenceVoucher), stock); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return db, nil
}

// startReference runs this binary's reference subcommand and waits for its
// "ready <address>" line.
func (e *env) startReference(ctx context.Context, s *runSpace, m Mode, usersFile string) (*child, string, error) {
	args := []string{ReferenceCommand, "--mode", string(m), "--redis", e.redisURL, "--prefix", s.prefix,
		"--users", usersFile, "--pool", strconv.Itoa(e.opts.Concurrency)}
	if m == ModeFullpipe {
		cfg, err := mysql.ParseDSN(s.dsn)
		if err != nil {
			return nil, "", err
		}
		args = append(args, "--dsn", cfg.FormatDSN())
	}
	logPath := filepath.Join(e.tmp, fmt.Sprintf("reference-%s-%s.log", m, s.name))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	// A pipe of our own (not StdoutPipe), so the wait below does not race
	// cmd.Wait closing it.
	pr, pw, err := os.Pipe()
	if err != nil {
		_ = logFile.Close()
		return nil, "", err
	}
	defer pr.Close()
	cmd := exec.Command(e.opts.ReferenceBinary, args...)
	cmd.Stdout, cmd.Stderr = pw, logFile
	err = cmd.Start()
	_ = pw.Close()
	if err != nil {
		_ = logFile.Close()
		return nil, "", fmt.Errorf("start the reference (%s): %w", e.opts.ReferenceBinary, err)
	}
	ch := &child{cmd: cmd, done: make(chan error, 1), log: logPath}
	go func() {
		ch.done <- cmd.Wait()
		_ = logFile.Close()
		close(ch.done)
	}()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				ready <- addr
				return
			}
		}
		close(ready)
	}()
	select {
	case addr, ok := <-ready:
		if ok {
			return ch, "http://" + addr, nil
		}
		<-ch.done
		return nil, "", fmt.Errorf("the reference exited before it was ready: %s", ch.tail())
	case <-time.After(childReady):
		ch.kill()
		return nil, "", fmt.Errorf("the reference was not ready within %s: %s", childReady, ch.tail())
	case <-ctx.Done():
		ch.kill()
		return nil, "", ctx.Err()
	}
}

// referenceFailures reads the failed attempts off the reference's stats line.
func referenceFailures(log string) int {
	i := strings.LastIndex(log, "stats ")
	if i < 0 {
		return 0
	}
	f := strings.Fields(log[i:])
	for k := 0; k+1 < len(f); k++ {
		if f[k] == "failures" {
			n, _ := strconv.Atoi(f[k+1])
			return n
		}
	}
	return 0
}
