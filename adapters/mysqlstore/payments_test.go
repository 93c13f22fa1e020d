package mysqlstore_test

import (
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// Payments recorded on their orders before tb_payment existed are copied into
// it by the migration, so the same notification after the upgrade is
// recognised (nothing changes) instead of counted as a double charge.
func TestPaymentsMigrationKeepsEarlierPayments(t *testing.T) {
	for _, b := range sqlBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			db, s := migrated(t, b.open(t)(t))
			v := add(t, s, 1, 5)
			paid, late := testenv.Order(t, 1, 7, v.ID()), testenv.Order(t, 2, 8, v.ID())
			if _, err := s.orders.CreateBatch(ctx(t), []domain.VoucherOrder{paid, late}); err != nil {
				t.Fatal(err)
			}
			// The limit per user's columns came last, then the sale
			// controls': forced (they hold the sales' state and the orders'
			// places).
			if rolled, err := mysqlstore.Rollback(ctx(t), db, true); err != nil || len(rolled) != 1 || rolled[0] != migrations[11] {
				t.Fatalf("down: %v, %v; want %s", rolled, err, migrations[11])
			}
			if rolled, err := mysqlstore.Rollback(ctx(t), db, true); err != nil || len(rolled) != 1 || rolled[0] != migrations[10] {
				t.Fatalf("down: %v, %v; want %s", rolled, err, migrations[10])
			}
			// The order list's index and the audit trail (empty here: the
			// voucher was stored by the tools' AddSeckill) came before.
			for _, m := range []string{migrations[9], migrations[8]} {
				if rolled, err := mysqlstore.Rollback(ctx(t), db, false); err != nil || len(rolled) != 1 || rolled[0] != m {
					t.Fatalf("down: %v, %v; want %s", rolled, err, m)
				}
			}
			// The forfeit rule's and the waiting room's migrations came after
			// the payments': they go first, forced (their columns hold the
			// orders' rule and the sale's settings).
			if rolled, err := mysqlstore.Rollback(ctx(t), db, true); err != nil || len(rolled) != 1 || rolled[0] != migrations[7] {
				t.Fatalf("down: %v, %v; want %s", rolled, err, migrations[7])
			}
			if rolled, err := mysqlstore.Rollback(ctx(t), db, true); err != nil || len(rolled) != 1 || rolled[0] != migrations[6] {
				t.Fatalf("down: %v, %v; want %s", rolled, err, migrations[6])
			}
			if rolled, err := mysqlstore.Rollback(ctx(t), db, false); err != nil || len(rolled) != 1 || rolled[0] != migrations[5] {
				t.Fatalf("down: %v, %v; want %s", rolled, err, migrations[5])
			}
			for _, q := range []string{
				"UPDATE tb_voucher_order SET status = 2, transaction_id = 'tx-paid', pay_time = '2026-12-01 10:00:00' WHERE id = 1",
				"UPDATE tb_voucher_order SET status = 5, transaction_id = 'tx-late', pay_time = '2026-12-01 10:00:00' WHERE id = 2",
			} {
				if _, err := db.ExecContext(ctx(t), q); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := mysqlstore.Migrate(ctx(t), db); err != nil {
				t.Fatal(err)
			}
			repo := mysqlstore.NewOrderRepo(db)
			for _, tt := range []struct {
				o    domain.VoucherOrder
				tx   string
				want domain.PaymentKind
			}{{paid, "tx-paid", domain.PaymentSettled}, {late, "tx-late", domain.PaymentLate}} {
				res, err := repo.Pay(ctx(t), domain.Payment{TransactionID: tt.tx, Order: tt.o, Amount: 1, At: time.Now()})
				if err != nil || res.New || res.Kind != tt.want {
					t.Fatalf("pay %s again after the upgrade: %+v, %v; want the recorded %s, nothing new", tt.tx, res, err, tt.want)
				}
			}
			tally, err := repo.Tally(ctx(t), v.ID())
			if err != nil || tally.RefundsOwed != 1 || tally.DoubleCharges != 0 {
				t.Fatalf("tally %+v, %v; want the late payment owed back, no double charge", tally, err)
			}
		})
	}
}
