package mysqlstore

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"net"

	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
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
	mysqlDuplicateEntry  = 1062 // ER_DUP_ENTRY
)

// SQLite result codes (modernc reports extended codes; the primary code is
// the low byte).
const (
	sqliteBusy             = 5
	sqliteLocked           = 6
	sqliteConstraintUnique = 2067
	sqliteConstraintPK     = 1555
)

// wrap names the operation and marks transient failures with ErrTransient.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if isTransient(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrTransient, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func isTransient(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case mysqlLockWaitTimeout, mysqlDeadlock, mysqlTooManyConns, mysqlServerShutdown:
			return true
		}
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		code := se.Code() & 0xff
		return code == sqliteBusy || code == sqliteLocked
	}
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.As(err, &ne)
}

func isDuplicateKey(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == mysqlDuplicateEntry
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqliteConstraintUnique || se.Code() == sqliteConstraintPK
	}
	return false
}
