package mysqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"modernc.org/sqlite"

	"github.com/hmdp-go/seckill/ports"
)

// ErrTransient marks a failure that says nothing about the data: a lost
// connection, a deadlock, a lock wait that timed out, a busy SQLite file.
// Nothing was committed and the same call may simply be retried; the worker
// retries every error anyway, the mark tells the logs and backoff why.
var ErrTransient = errors.New("transient database error")

// MySQL server error numbers worth retrying.
const (
	mysqlLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	mysqlDeadlock        = 1213 // ER_LOCK_DEADLOCK
	mysqlTooManyConns    = 1040 // ER_CON_COUNT_ERROR
	mysqlServerShutdown  = 1053 // ER_SERVER_SHUTDOWN
	mysqlReadOnly        = 1290 // ER_OPTION_PREVENTS_STATEMENT (--read-only: a failover in progress)
	mysqlReadOnlyTx      = 1792 // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
	mysqlDuplicateEntry  = 1062 // ER_DUP_ENTRY
)

// mysqlDataErrors are MySQL/MariaDB errors about the data itself: the same
// rows are refused the same way on every retry (ports.ErrPermanent). Unknown
// errors are not in this list and stay retried: misjudging a passing failure
// as permanent would fail an order that would have landed.
var mysqlDataErrors = map[uint16]bool{
	1048: true, // ER_BAD_NULL_ERROR
	1216: true, // ER_NO_REFERENCED_ROW
	1217: true, // ER_ROW_IS_REFERENCED
	1264: true, // ER_WARN_DATA_OUT_OF_RANGE
	1265: true, // WARN_DATA_TRUNCATED
	1292: true, // ER_TRUNCATED_WRONG_VALUE
	1364: true, // ER_NO_DEFAULT_FOR_FIELD
	1366: true, // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD
	1406: true, // ER_DATA_TOO_LONG
	1451: true, // ER_ROW_IS_REFERENCED_2
	1452: true, // ER_NO_REFERENCED_ROW_2
	3819: true, // ER_CHECK_CONSTRAINT_VIOLATED (MySQL)
	4025: true, // ER_CONSTRAINT_FAILED (MariaDB CHECK)
}

// SQLite result codes (modernc reports extended codes; the primary code is
// the low byte).
const (
	sqliteBusy             = 5
	sqliteLocked           = 6
	sqliteTooBig           = 18
	sqliteConstraint       = 19
	sqliteMismatch         = 20
	sqliteConstraintUnique = 2067
	sqliteConstraintPK     = 1555
)

// wrap names the operation and marks transient failures with ErrTransient,
// and failures of the data itself with ports.ErrPermanent.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if isTransient(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrTransient, err)
	}
	if isPermanent(err) {
		return fmt.Errorf("%s: %w: %w", op, ports.ErrPermanent, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isPermanent: the database refused the data (NOT NULL, range, length,
// foreign key, CHECK). A duplicate key is not in it: the repositories turn
// the duplicates they expect into outcomes, and an unexpected one is a race
// worth retrying.
func isPermanent(err error) bool {
	my, lite := codes(err)
	switch lite & 0xff {
	case sqliteTooBig, sqliteMismatch:
		return true
	case sqliteConstraint:
		return lite != sqliteConstraintUnique && lite != sqliteConstraintPK
	}
	return mysqlDataErrors[my]
}

func isTransient(err error) bool {
	switch my, lite := codes(err); {
	case my != 0:
		return slices.Contains([]uint16{mysqlLockWaitTimeout, mysqlDeadlock, mysqlTooManyConns, mysqlServerShutdown, mysqlReadOnly, mysqlReadOnlyTx}, my)
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

// codes are the MySQL error number and the SQLite result code err carries
// (0: not an answer of that database).
func codes(err error) (my uint16, lite int) {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number, 0
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return 0, se.Code()
	}
	return 0, 0
}

// A deadlock (or a lock wait the server gave up on) rolls the whole
// transaction back and says nothing about the data: InnoDB picked this one
// as the victim of a cycle with another (a payment, a cancel, the expiry and
// the order worker all lock an order's row and its sale's stock row). Such a
// transaction is run again here, a few times within the caller's context,
// rather than answered as a 503 to a request that would then be retried by
// hand.
const (
	txAttempts   = 5
	txRetryFirst = 5 * time.Millisecond
)

// runInTx is bun's RunInTx, run again after a deadlock or a lock wait
// timeout while attempts and ctx last. It returns what fn's last attempt
// returned, so a result of an attempt rolled back is never reported.
func runInTx[T any](ctx context.Context, db bun.IDB, opts *sql.TxOptions, fn func(ctx context.Context, tx bun.Tx) (T, error)) (T, error) {
	wait := txRetryFirst
	for attempt := 1; ; attempt++ {
		var out T
		err := db.RunInTx(ctx, opts, func(ctx context.Context, tx bun.Tx) (err error) {
			out, err = fn(ctx, tx)
			return err
		})
		if err == nil || attempt == txAttempts || !isLockConflict(err) {
			return out, err
		}
		// Jitter, so the two sides of the cycle do not meet again.
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return out, err
		case <-t.C:
		}
		wait *= 2
	}
}

// isLockConflict: the server rolled the transaction back to break a lock
// cycle, or gave up waiting for a lock.
func isLockConflict(err error) bool {
	my, _ := codes(err)
	return my == mysqlDeadlock || my == mysqlLockWaitTimeout
}
