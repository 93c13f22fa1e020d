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

// ErrTransient marks a failure that says nothing about the data (a lost
// connection, a deadlock, a lock wait timeout, a busy SQLite file): nothing
// was committed and the same call may be retried.
var ErrTransient = errors.New("transient database error")

// MySQL server error numbers.
const (
	mysqlLockWaitTimeout = 1205
	mysqlDeadlock        = 1213
	mysqlDuplicateEntry  = 1062
	mysqlUnknownDatabase = 1049
)

// mysqlRetryable adds to the lock conflicts too many connections (1040), a
// shutdown (1053) and a read-only server, as in a failover (1290, 1792).
var mysqlRetryable = []uint16{mysqlLockWaitTimeout, mysqlDeadlock, 1040, 1053, 1290, 1792}

// mysqlDataErrors are MySQL/MariaDB refusals of the data itself (NOT NULL,
// foreign key, range, truncation, length, CHECK), refused alike on every
// retry. Unknown errors stay retried: failing an order that would have
// landed is worse than retrying.
var mysqlDataErrors = []uint16{1048, 1216, 1217, 1264, 1265, 1292, 1364, 1366, 1406, 1451, 1452, 3819, 4025}

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

// isPermanent leaves out duplicate keys: the repositories turn the ones they
// expect into outcomes, and an unexpected one is a race worth retrying.
func isPermanent(err error) bool {
	my, lite := codes(err)
	switch lite & 0xff {
	case sqliteTooBig, sqliteMismatch:
		return true
	case sqliteConstraint:
		return lite != sqliteConstraintUnique && lite != sqliteConstraintPK
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

// codes are the MySQL error number and the SQLite result code err carries
// (0: not an answer of that database).
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

// A deadlock or lock wait timeout rolls the transaction back and says nothing
// about the data (payments, cancels, the expiry and the order worker all lock
// an order's row and its sale's stock row), so runInTx runs it again a few
// times rather than answering a 503.
const (
	txAttempts   = 5
	txRetryFirst = 5 * time.Millisecond
)

// runInTx is bun's RunInTx, run again after a lock conflict while attempts
// and ctx last. It returns what the last attempt returned, so a result of an
// attempt rolled back is never reported.
func runInTx[T any](ctx context.Context, db bun.IDB, opts *sql.TxOptions, fn func(ctx context.Context, tx bun.Tx) (T, error)) (T, error) {
	wait := txRetryFirst
	for attempt := 1; ; attempt++ {
		var out T
		err := db.RunInTx(ctx, opts, func(ctx context.Context, tx bun.Tx) (err error) {
			out, err = fn(ctx, tx)
			return err
		})
		if my, _ := codes(err); err == nil || attempt == txAttempts || (my != mysqlDeadlock && my != mysqlLockWaitTimeout) {
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
