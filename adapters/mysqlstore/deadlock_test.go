package mysqlstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestCancelChosenAsADeadlockVictimIsRunAgain injects a real deadlock on
// MariaDB: a buyer's cancel locks its order's row and waits for the sale's
// stock row, which another transaction holds and which then asks for the
// order's row. InnoDB breaks the cycle by rolling back the lighter side, the
// cancel (the other has written 500 rows). The cancel is run again and
// succeeds once the other commits; before, the deadlock reached the buyer as
// a 503 (issue 41: "Error 1213 ... record payment").
func TestCancelChosenAsADeadlockVictimIsRunAgain(t *testing.T) {
	db := openMySQL(t, testenv.MySQLDSN(t))
	s := reposOn(t, db)
	c := ctx(t)
	v := add(t, s, 1, 5)
	id, err := domain.NewOrderID(testenv.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	o := testenv.Order(t, id, 7, v.ID())
	if _, err := s.orders.CreateBatch(c, []domain.VoucherOrder{o}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(c, "CREATE TABLE heavy (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}

	other, err := db.BeginTx(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback() }()
	values := make([]string, 500)
	for i := range values {
		values[i] = fmt.Sprintf("(%d)", i)
	}
	if _, err := other.ExecContext(c, "INSERT INTO heavy (id) VALUES "+strings.Join(values, ",")); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(c, "SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ? FOR UPDATE", int64(v.ID())); err != nil {
		t.Fatal(err)
	}

	type result struct {
		st  domain.OrderStatus
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, _, err := s.orders.Cancel(c, o.ID())
		done <- result{st, err}
	}()
	// The cancel holds the order's row and waits for the stock row.
	testenv.Eventually(t, 10*time.Second, func() (bool, string) {
		var n int
		if err := db.QueryRowContext(c, "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1, fmt.Sprintf("%d transactions waiting for a lock", n)
	})
	// Closing the cycle: InnoDB rolls the cancel back, and this one goes on.
	if _, err := other.ExecContext(c, "SELECT id FROM tb_voucher_order WHERE id = ? FOR UPDATE", int64(o.ID())); err != nil {
		t.Fatalf("the heavier side was chosen as the victim, the test proves nothing: %v", err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.st.State != domain.OrderCancelled {
		t.Fatalf("cancel after being a deadlock's victim: %+v, %v; want cancelled", r.st, r.err)
	}
	var stock int
	if err := db.QueryRowContext(c, "SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?", int64(v.ID())).Scan(&stock); err != nil || stock != 5 {
		t.Fatalf("stock %d (%v), want the unit back once: 5", stock, err)
	}
}

// TestTheExpiryDoesNotHoldUpTheOrderWorker: while the expiry holds the due
// orders it took, the order worker writes a batch of new unpaid orders of
// the same sale (holding the sale's stock row, as it does). Under
// REPEATABLE READ the expiry's range scan had next-key locks past its last
// due order, the worker's insert waited on them, and the expiry then waited
// for the stock row the worker held: a deadlock. It must not wait at all.
func TestTheExpiryDoesNotHoldUpTheOrderWorker(t *testing.T) {
	db := openMySQL(t, testenv.MySQLDSN(t))
	s := reposOn(t, db)
	c := ctx(t)
	v := add(t, s, 1, 10)
	orders := s.orders.WithPayWindow(time.Minute)
	at := testenv.Now()
	for i := range 3 {
		id, err := domain.NewOrderID(at, uint32(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := orders.CreateBatch(c, []domain.VoucherOrder{testenv.Order(t, id, domain.UserID(i+1), v.ID())}); err != nil {
			t.Fatal(err)
		}
	}
	later, err := domain.NewOrderID(at.Add(time.Hour), 9)
	if err != nil {
		t.Fatal(err)
	}
	worker := make(chan error, 1)
	mysqlstore.SetAfterExpiryScan(orders, func() {
		// The worker's batch, while the expiry holds its rows; bounded, so
		// a wait on the expiry's locks fails here instead of deadlocking.
		wctx, cancel := context.WithTimeout(c, 5*time.Second)
		defer cancel()
		_, err := orders.CreateBatch(wctx, []domain.VoucherOrder{testenv.Order(t, later, 9, v.ID())})
		worker <- err
	})
	due, err := orders.ExpireDue(c, at.Add(2*time.Minute), 10)
	if err != nil || len(due) != 3 {
		t.Fatalf("expiry: %d due, %v; want the 3 past their deadline", len(due), err)
	}
	if err := <-worker; err != nil {
		t.Fatalf("the worker's batch while the expiry held its orders: %v; want it written at once", err)
	}
}
