package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// slowDrain makes fulfilment take seconds (one order per transaction, one
// worker), so a kill lands while orders are still on their way to MySQL.
var slowDrain = []string{"SECKILL_BATCH_SIZE=1"}

const crashUsers = 3000

// killMidDrain claims the whole stock, then kill -9s the process once MySQL
// holds some orders but not all, and returns what the users were told.
func killMidDrain(t *testing.T, c *cluster, queue string) (voucher domain.VoucherID, told int) {
	t.Helper()
	p := c.start("first", append([]string{"SECKILL_QUEUE=" + queue}, slowDrain...)...)
	vid := p.createVoucher(t, crashUsers)
	tokens := c.mint(crashUsers, 5_000_000)
	won := claimAll(t, []*proc{p}, vid, tokens)
	if len(won) != crashUsers {
		t.Fatalf("%d claims succeeded, want %d", len(won), crashUsers)
	}
	testenv.Eventually(t, 60*time.Second, func() (bool, string) {
		b := c.books(vid)
		return b.orders > 0, fmt.Sprintf("%d orders in MySQL", b.orders)
	})
	p.kill9(t)
	b := c.books(vid)
	if b.orders >= crashUsers {
		t.Fatalf("the drain finished before the kill (%d orders); the test proves nothing", b.orders)
	}
	t.Logf("%s: killed with %d of %d orders in MySQL", queue, b.orders, crashUsers)
	return vid, len(won)
}

func TestCrashChannelModeLosesWhatItsChannelHeldAndReconcileRepairsRedis(t *testing.T) {
	c := newCluster(t)
	v, told := killMidDrain(t, c, "channel")

	// The restart drains nothing: the channel's orders died with the process.
	p := c.start("restarted", "SECKILL_QUEUE=channel")
	after := c.books(v)
	lost := told - after.orders
	t.Logf("channel mode after kill -9: %d of %d sold orders lost", lost, told)
	if lost <= 0 {
		t.Fatalf("no order lost (%d in MySQL): the kill came too late to show the channel's guarantee", after.orders)
	}
	// The loss is visible, not hidden: Redis still holds every sold claim,
	// so Redis and MySQL disagree by exactly the number lost.
	if after.buyers-after.orders != lost || after.redisStock != 0 || after.dbStock != crashUsers-after.orders {
		t.Fatalf("books after the crash: %+v; want Redis buyers - MySQL orders = %d lost", after, lost)
	}

	out, err := c.reconcile(v)
	if err == nil || !strings.Contains(out, fmt.Sprintf("claimed in redis, not in mysql: %d", lost)) {
		t.Fatalf("reconcile must report the %d lost orders and fail:\n%s(err %v)", lost, out, err)
	}
	p.stop(t) // --fix is for when no claims run
	out, err = c.reconcile(v, "--fix")
	if err != nil {
		t.Fatalf("reconcile --fix: %v\n%s", err, out)
	}
	fixed := c.books(v)
	if fixed.buyers != fixed.orders || fixed.redisStock != fixed.dbStock || fixed.redisStock != lost {
		t.Fatalf("after --fix: %+v; want Redis = MySQL, %d units back on sale", fixed, lost)
	}
	if out, err := c.reconcile(v); err != nil {
		t.Fatalf("reconcile after --fix still differs: %v\n%s", err, out)
	}
}

func TestCrashStreamModeLosesNothing(t *testing.T) {
	c := newCluster(t, "SECKILL_CONSUMER=node-1")
	v, told := killMidDrain(t, c, "stream")

	// The same consumer restarts, re-reads what it left pending, and drains the rest.
	p := c.start("restarted", append([]string{"SECKILL_QUEUE=stream"}, slowDrain...)...)
	c.waitAllFulfilled(v, told)
	b := c.books(v)
	if b.users != told || b.dbStock != 0 || b.redisStock != 0 || b.buyers != told || b.failures != 0 {
		t.Fatalf("books after kill -9 and restart: %+v; want %d orders for %d users, stock 0 everywhere", b, told, told)
	}
	t.Logf("stream mode after kill -9: 0 of %d sold orders lost", told)
	p.stop(t)
	if out, err := c.reconcile(v); err != nil || !strings.Contains(out, "pending: 0") {
		t.Fatalf("reconcile after recovery: %v\n%s", err, out)
	}
}

// waitAllFulfilled waits until MySQL holds want orders of the voucher and its
// stream has nothing left: no entry pending, none undelivered.
func (c *cluster) waitAllFulfilled(v domain.VoucherID, want int) {
	c.t.Helper()
	stream := redisschema.KeysFor(c.prefix, v).Orders
	testenv.Eventually(c.t, 120*time.Second, func() (bool, string) {
		b := c.books(v)
		pending := c.rdb.XPending(context.Background(), stream, "seckill").Val()
		left := c.rdb.XLen(context.Background(), stream).Val()
		var held int64
		if pending != nil {
			held = pending.Count
		}
		return b.orders == want && held == 0 && left == 0,
			fmt.Sprintf("%d of %d orders in MySQL, %d entries pending, %d in the stream", b.orders, want, held, left)
	})
}

// TestTwoInstancesOneGroupTakeOverADeadInstancesOrders: two processes share
// the consumer group; one holds entries it cannot write (its database link is
// cut) when it is killed, and the other claims and fulfils them.
func TestTwoInstancesOneGroupTakeOverADeadInstancesOrders(t *testing.T) {
	c := newCluster(t, "SECKILL_QUEUE=stream", "SECKILL_STREAM_MIN_IDLE=2s", "SECKILL_SHUTDOWN_TIMEOUT=1s",
		"SECKILL_BATCH_SIZE=50")
	cfg, err := mysql.ParseDSN(envValue(c.env, "SECKILL_MYSQL_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := newTCPProxy(t, cfg.Addr)
	cfg.Addr = proxy.addr
	a := c.start("a", "SECKILL_CONSUMER=a", "SECKILL_MYSQL_DSN="+cfg.FormatDSN())
	b := c.start("b", "SECKILL_CONSUMER=b")
	vid := a.createVoucher(t, crashUsers)
	proxy.cut() // a can still claim (Redis) but cannot write its batches

	won := claimAll(t, []*proc{a, b}, vid, c.mint(crashUsers, 9_000_000))
	stream := redisschema.KeysFor(c.prefix, vid).Orders
	var heldByA int64
	testenv.Eventually(t, 30*time.Second, func() (bool, string) {
		p := c.rdb.XPending(context.Background(), stream, "seckill").Val()
		if p != nil {
			heldByA = p.Consumers["a"]
		}
		return heldByA > 0, "instance a holds no entries yet"
	})
	a.kill9(t)
	t.Logf("killed instance a holding %d entries; b must claim them after the min idle time", heldByA)

	c.waitAllFulfilled(vid, len(won))
	bk := c.books(vid)
	if bk.users != len(won) || bk.dbStock != 0 || bk.failures != 0 {
		t.Fatalf("books: %+v; want %d orders, one per user, stock 0, no failures", bk, len(won))
	}
	b.stop(t)
}
