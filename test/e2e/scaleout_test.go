package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// newOnRedisCluster runs the services on the Redis Cluster of
// SECKILL_TEST_REDIS_CLUSTER_ADDRS (skipped without it, failed under CI).
func newOnRedisCluster(t *testing.T, extra ...string) *cluster {
	t.Helper()
	rdb := testenv.RedisCluster(t)
	c := newClusterOn(t, rdb, "SECKILL_REDIS_CLUSTER_ADDRS="+os.Getenv(testenv.RedisClusterEnv), extra...)
	testenv.DropPrefix(t, rdb, c.prefix)
	return c
}

const (
	scaleUsers = 2500
	scaleStock = 2000
	// Every scaleDupEvery-th user presses buy twice at once, on two
	// instances: one order per user must hold across processes.
	scaleDupEvery = 5
	// scaleLatency slows every MySQL round trip while the users claim, so
	// however fast the machine, the three instances are still writing when
	// one of them is killed (each batch of scaleBatch orders takes several
	// round trips).
	scaleLatency = 40 * time.Millisecond
	scaleBatch   = 20
)

// TestThreeInstancesOnARedisClusterLoseNothingWhenOneIsKilled: three service
// processes share a Redis Cluster, one MySQL and one consumer group; users
// stampede a voucher through all three; one instance is killed -9 while the
// orders are still on their way to MySQL, holding entries it had read and not
// written; the other two claim them once they are idle for MinIdle, and the
// books come out exact: every success answered is one order in MySQL, one per
// user, and the stock left is the same in Redis and MySQL.
func TestThreeInstancesOnARedisClusterLoseNothingWhenOneIsKilled(t *testing.T) {
	// MinIdle short so the takeover happens within the test, the shutdown
	// timeout below it as a deployment must have it (a stopping instance
	// finishes before the others would take its entries over).
	c := newOnRedisCluster(t, "SECKILL_QUEUE=stream", "SECKILL_STREAM_MIN_IDLE=2s", "SECKILL_SHUTDOWN_TIMEOUT=1s",
		"SECKILL_BATCH_SIZE="+strconv.Itoa(scaleBatch))
	cfg, err := mysql.ParseDSN(envValue(c.env, "SECKILL_MYSQL_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := newTCPProxy(t, cfg.Addr)
	cfg.Addr = proxy.addr
	viaProxy := "SECKILL_MYSQL_DSN=" + cfg.FormatDSN()

	names := []string{"scale-1", "scale-2", "scale-3"}
	procs := make([]*proc, len(names))
	for i, n := range names {
		procs[i] = c.start(n, "SECKILL_CONSUMER="+n, viaProxy)
	}
	vid := procs[0].createVoucher(t, scaleStock)

	proxy.setLatency(scaleLatency)
	tokens := c.mint(scaleUsers, 20_000_000)
	won, codes := stampede(t, procs, vid, tokens, scaleDupEvery)
	t.Logf("stampede over %d instances: %d successes, outcomes %v; %d orders in MySQL at its end",
		len(procs), len(won), codes, c.books(vid).orders)
	if len(won) != scaleStock {
		t.Fatalf("%d users were told success for a stock of %d and %d users", len(won), scaleStock, scaleUsers)
	}

	// Kill the third instance while it holds entries, with MySQL part filled.
	victim := procs[2]
	stream := redisschema.KeysFor(c.prefix, vid).Orders
	held := func() int64 {
		p, err := c.rdb.XPending(context.Background(), stream, "seckill").Result()
		if redis.HasErrorPrefix(err, "NOGROUP") {
			// The claims can outrun the consumers' discovery of a new
			// stream: no group yet, so nobody holds anything yet.
			return 0
		}
		if err != nil {
			t.Fatalf("XPENDING %s: %v", stream, err)
		}
		return p.Consumers[victim.name]
	}
	// A tenth in: every instance has been writing for a while.
	testenv.Eventually(t, 30*time.Second, func() (bool, string) {
		b := c.books(vid)
		h := held()
		return b.orders >= len(won)/10 && h > 0, fmt.Sprintf("%d orders in MySQL, %s holds %d entries", b.orders, victim.name, h)
	})
	victim.kill9(t)
	// The dead process acks nothing more, and the others take an entry only
	// after MinIdle (2s) without a renewal (the last came at most MinIdle/3
	// ago): what its name holds now is what it held when it died.
	heldAtKill := held()
	atKill := c.books(vid)
	if heldAtKill == 0 {
		t.Fatalf("%s held no entries when killed; the test proves nothing", victim.name)
	}
	if atKill.orders >= len(won) {
		t.Fatalf("the drain finished before the kill (%d orders); the test proves nothing", atKill.orders)
	}
	t.Logf("killed %s holding %d entries, with %d of %d orders in MySQL", victim.name, heldAtKill, atKill.orders, len(won))

	proxy.setLatency(0)
	c.waitAllFulfilled(vid, len(won))

	b := c.books(vid)
	left := scaleStock - len(won)
	if b.users != len(won) || b.buyers != len(won) || b.dbStock != left || b.redisStock != left || b.failures != 0 {
		t.Fatalf("books: %+v; want %d orders for %d users (Redis buyers too), stock left %d in Redis and MySQL, no failures",
			b, len(won), len(won), left)
	}
	c.sameOrders(vid, won, 20_000_000)

	for _, p := range procs[:2] {
		p.stop(t)
	}
	out, err := c.reconcile(vid)
	if err != nil || !strings.Contains(out, "consistent") || !strings.Contains(out, "pending: 0") {
		t.Fatalf("reconcile after the takeover: %v\n%s", err, out)
	}
}

// stampede has every user claim the voucher once, the users spread round
// robin over the instances, and every dupEvery-th user also at the same time
// on the next instance; 64 requests are in flight at once. It returns the
// order each winner was told, by user index, and how many answers had each
// failure code. A user told success twice, or an answer other than success,
// sold_out or duplicate, fails the test.
func stampede(t *testing.T, procs []*proc, vid domain.VoucherID, tokens []string, dupEvery int) (map[int]domain.OrderID, map[string]int) {
	t.Helper()
	type req struct{ user, proc int }
	var reqs []req
	for i := range tokens {
		reqs = append(reqs, req{i, i % len(procs)})
		if i%dupEvery == 0 {
			reqs = append(reqs, req{i, (i + 1) % len(procs)})
		}
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var (
		mu    sync.Mutex
		won   = map[int]domain.OrderID{}
		codes = map[string]int{}
		errs  []string
		wg    sync.WaitGroup
	)
	work := make(chan req)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				p := procs[r.proc]
				status, env := call(t, client, http.MethodPost, fmt.Sprintf("%s/voucher-order/seckill/%d", p.base, vid), tokens[r.user], nil)
				mu.Lock()
				switch {
				case status == http.StatusOK && env.Success:
					var s string
					_ = json.Unmarshal(env.Data, &s)
					id, _ := strconv.ParseInt(s, 10, 64)
					if prev, twice := won[r.user]; twice {
						errs = append(errs, fmt.Sprintf("user %d told success twice: orders %d and %d", r.user, prev, id))
					}
					won[r.user] = domain.OrderID(id)
				case status == http.StatusOK && (env.Code == "sold_out" || env.Code == "duplicate"):
					codes[env.Code]++
				default:
					errs = append(errs, fmt.Sprintf("user %d on %s: %d %q", r.user, p.name, status, env.Code))
				}
				mu.Unlock()
			}
		}()
	}
	for _, r := range reqs {
		work <- r
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d claims went wrong, e.g. %v", len(errs), errs[:min(5, len(errs))])
	}
	return won, codes
}

// sameOrders checks that MySQL holds exactly the orders the users were told,
// each under its user (user index i is user first+i): none lost, none made up.
func (c *cluster) sameOrders(vid domain.VoucherID, told map[int]domain.OrderID, first domain.UserID) {
	c.t.Helper()
	rows, err := c.db.QueryContext(context.Background(), "SELECT id, user_id FROM tb_voucher_order WHERE voucher_id = ?", int64(vid))
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	want := make(map[domain.OrderID]domain.UserID, len(told))
	for i, id := range told {
		want[id] = first + domain.UserID(i)
	}
	var extra []string
	for rows.Next() {
		var id, user int64
		if err := rows.Scan(&id, &user); err != nil {
			c.t.Fatal(err)
		}
		if u, ok := want[domain.OrderID(id)]; ok && u == domain.UserID(user) {
			delete(want, domain.OrderID(id))
			continue
		}
		extra = append(extra, fmt.Sprintf("order %d of user %d", id, user))
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	if len(want) > 0 || len(extra) > 0 {
		c.t.Fatalf("MySQL differs from what the users were told: %d told orders missing, %d not told (e.g. %v)",
			len(want), len(extra), extra[:min(3, len(extra))])
	}
}
