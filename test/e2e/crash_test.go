package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// slowDrain makes fulfilment take seconds (one order per transaction, one
// worker), so a kill lands while orders are still on their way to MySQL.
var slowDrain = []string{"SECKILL_BATCH_SIZE=1", "SECKILL_WORKERS=1", "SECKILL_BATCH_LINGER=0s"}

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
