package e2e_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/hmdp-go/seckill/test/testenv"
)

// TestDatabaseOutageLosesNothing cuts MySQL off while the worker drains, for
// a few seconds, then brings it back: every claimed order ends in MySQL
// exactly once.
func TestDatabaseOutageLosesNothing(t *testing.T) {
	for _, queue := range outageQueues {
		t.Run(queue, func(t *testing.T) {
			c := newCluster(t)
			cfg, err := mysql.ParseDSN(envValue(c.env, "SECKILL_MYSQL_DSN"))
			if err != nil {
				t.Fatal(err)
			}
			proxy := newTCPProxy(t, cfg.Addr)
			cfg.Addr = proxy.addr
			p := c.start("svc", "SECKILL_QUEUE="+queue, "SECKILL_MYSQL_DSN="+cfg.FormatDSN(),
				"SECKILL_BATCH_SIZE=5")
			const users = 1000
			vid := p.createVoucher(t, users)
			won := claimAll(t, []*proc{p}, vid, c.mint(users, 7_000_000))
			testenv.Eventually(t, 60*time.Second, func() (bool, string) {
				b := c.books(vid)
				return b.orders > 0, fmt.Sprintf("%d orders in MySQL", b.orders)
			})
			proxy.cut()
			cutAt := c.books(vid).orders
			// The outage itself: its length is the scenario, not a wait for something.
			time.Sleep(3 * time.Second)
			proxy.restore()

			testenv.Eventually(t, 90*time.Second, func() (bool, string) {
				b := c.books(vid)
				return b.orders == len(won), fmt.Sprintf("%d of %d orders in MySQL", b.orders, len(won))
			})
			b := c.books(vid)
			if cutAt >= users {
				t.Fatalf("the drain finished before the outage; the test proves nothing")
			}
			if b.users != len(won) || b.dbStock != 0 || b.failures != 0 {
				t.Fatalf("after the outage: %+v; want %d orders for %d users, stock 0, no failures", b, len(won), len(won))
			}
			for i, id := range won {
				var n int
				if err := c.db.QueryRow("SELECT COUNT(*) FROM tb_voucher_order WHERE id = ?", int64(id)).Scan(&n); err != nil || n != 1 {
					t.Fatalf("order %d of user %d: %d rows (%v)", id, i, n, err)
				}
			}
			t.Logf("%s: outage cut in at %d of %d orders; all %d in MySQL afterwards", queue, cutAt, users, b.orders)
		})
	}
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			return kv[len(key)+1:]
		}
	}
	return os.Getenv(key)
}
