package mysqlstore

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"time"

	"github.com/uptrace/bun"
)

// A deadlock (or a lock wait the server gave up on) rolls the whole
// transaction back and says nothing about the data: InnoDB picked this one
// as the victim of a cycle with another (a payment, a cancel, the expiry and
// the order worker all lock an order's row and its sale's stock row). Such a
// transaction is run again here, a few times within the caller's context,
// rather than answered as a 503 to a request that would then be retried by
// hand. The functions given to runInTx start by resetting what they report.
const (
	txAttempts   = 5
	txRetryFirst = 5 * time.Millisecond
)

// runInTx is bun's RunInTx, run again after a deadlock or a lock wait
// timeout while attempts and ctx last.
func runInTx(ctx context.Context, db bun.IDB, fn func(ctx context.Context, tx bun.Tx) error) error {
	return runInTxWith(ctx, db, nil, fn)
}

// runInTxWith is runInTx with the transaction's options.
func runInTxWith(ctx context.Context, db bun.IDB, opts *sql.TxOptions, fn func(ctx context.Context, tx bun.Tx) error) error {
	wait := txRetryFirst
	for attempt := 1; ; attempt++ {
		err := db.RunInTx(ctx, opts, fn)
		if err == nil || attempt == txAttempts || !isLockConflict(err) {
			return err
		}
		// Jitter, so the two sides of the cycle do not meet again.
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
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
