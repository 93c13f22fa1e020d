package mysqlstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// migrate down on a database that holds a sale: every migration was applied
// in one group, and rolling back that group dropped every table, orders
// included. Now each down undoes one migration, and one whose down script
// would destroy rows is refused (nothing changes) unless forced.
func TestMigrateDownRefusesToDestroyRows(t *testing.T) {
	for _, b := range sqlBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			db, s := migrated(t, b.open(t)(t))
			v := add(t, s, 1, 5)
			o := testenv.Order(t, 1, 7, v.ID())
			if _, err := s.orders.CreateBatch(ctx(t), []domain.VoucherOrder{o}); err != nil {
				t.Fatal(err)
			}
			down := func(force bool) ([]string, error) { return mysqlstore.Rollback(ctx(t), db, force) }
			refused := func(wantMigration string, wantTables ...string) {
				t.Helper()
				rolled, err := down(false)
				var lost *mysqlstore.DataLossError
				if !errors.As(err, &lost) || lost.Migration != wantMigration ||
					fmt.Sprint(lost.Tables) != fmt.Sprint(wantTables) || len(rolled) != 0 {
					t.Fatalf("down: rolled back %v, err %v; want %s refused for %v", rolled, err, wantMigration, wantTables)
				}
			}
			rolledBack := func(force bool, want string) {
				t.Helper()
				if rolled, err := down(force); err != nil || fmt.Sprint(rolled) != fmt.Sprint([]string{want}) {
					t.Fatalf("down (force %v): rolled back %v, err %v; want [%s]", force, rolled, err, want)
				}
			}

			// The limit per user's columns of the sale and order tables.
			refused(migrations[11], "tb_seckill_voucher", "tb_voucher_order")
			rolledBack(true, migrations[11])

			// The sale controls' columns of the sale table.
			refused(migrations[10], "tb_seckill_voucher")
			rolledBack(true, migrations[10])

			// An index holds no data: it goes without --force.
			rolledBack(false, migrations[9])

			// The audit trail, once it holds an entry (written as the
			// service writes one, its sale's columns being rolled back).
			if _, err := db.ExecContext(ctx(t), "INSERT INTO tb_admin_audit (admin_id, action, voucher_id, detail, create_time) VALUES (?, ?, ?, ?, ?)",
				3, string(domain.ActionCreateVoucher), int64(v.ID()), `{}`, time.Now().UTC()); err != nil {
				t.Fatal(err)
			}
			refused(migrations[8], "tb_admin_audit")
			rolledBack(true, migrations[8])

			// The forfeit rule's column of the order table.
			refused(migrations[7], "tb_voucher_order")
			rolledBack(true, migrations[7])

			// The waiting room's columns of the sale table.
			refused(migrations[6], "tb_seckill_voucher")
			rolledBack(true, migrations[6])

			// No payment was received: an empty table goes without --force.
			rolledBack(false, migrations[5])

			// The lifecycle's columns of the order table.
			refused(migrations[4], "tb_voucher_order")
			rolledBack(true, migrations[4])

			// No deployment id was written: an empty table goes without --force.
			rolledBack(false, migrations[3])

			// The buckets column of a table with a sale in it.
			refused(migrations[2], "tb_seckill_voucher")
			status(t, db, migrations[:3], migrations[3:])
			// The sale is intact: 5 less the order (read in SQL: the
			// repository's reads need the newer migrations' columns).
			var stock int
			if err := db.NewSelect().Table("tb_seckill_voucher").Column("stock").Where("voucher_id = ?", v.ID()).Scan(ctx(t), &stock); err != nil || stock != 4 {
				t.Fatalf("stock after a refused down: %d (%v), want 4", stock, err)
			}
			rolledBack(true, migrations[2])

			// An empty table goes without --force.
			rolledBack(false, migrations[1])

			// The sale and its order.
			refused(migrations[0], "tb_seckill_voucher", "tb_voucher", "tb_voucher_order")
			status(t, db, migrations[:1], migrations[1:])
			if n, err := db.NewSelect().Table("tb_voucher_order").Count(ctx(t)); err != nil || n != 1 {
				t.Fatalf("orders after a refused down: %d (%v), want 1", n, err)
			}
			rolledBack(true, migrations[0])
			tablesExist(t, db, false)
			status(t, db, nil, migrations)
		})
	}
}
