package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// answer is one claim as its user saw it.
type answer struct {
	at, took time.Duration // sent, since the test's start; how long it took
	status   int           // 0: no answer
	code     string
	order    domain.OrderID
}

func (a answer) ok() bool { return a.status == http.StatusOK && a.code == "" }

// claimOnce sends one claim and reads what came back, however it ended.
func claimOnce(client *http.Client, base string, vid domain.VoucherID, token string, t0 time.Time) answer {
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/voucher-order/seckill/%d", base, vid), http.NoBody)
	req.Header.Set("authorization", token)
	start := time.Now()
	a := answer{at: start.Sub(t0)}
	resp, err := client.Do(req)
	a.took = time.Since(start)
	if err != nil {
		return a
	}
	defer resp.Body.Close()
	a.status = resp.StatusCode
	var env envelope
	_ = json.NewDecoder(resp.Body).Decode(&env)
	a.code = env.Code
	var s string
	if json.Unmarshal(env.Data, &s) == nil {
		id, _ := strconv.ParseInt(s, 10, 64)
		a.order = domain.OrderID(id)
	}
	return a
}

// saleLog gathers a sale's answers from many goroutines.
type saleLog struct {
	mu      sync.Mutex
	answers []answer
	won     map[int]domain.OrderID // user index -> order answered success
	unknown map[int]domain.OrderID // user index -> order answered outcome_unknown
}

func newSaleLog() *saleLog {
	return &saleLog{won: map[int]domain.OrderID{}, unknown: map[int]domain.OrderID{}}
}

func (l *saleLog) add(user int, a answer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers = append(l.answers, a)
	switch {
	case a.ok():
		l.won[user] = a.order
	case a.code == "outcome_unknown":
		l.unknown[user] = a.order
	}
}

// buyUntilAnswered is a user pressing buy until the service gives a final
// answer: an order, a refusal, or an order id whose outcome is unknown. A
// busy answer (or none) is pressed again.
func buyUntilAnswered(client *http.Client, base string, vid domain.VoucherID, token string, user int, t0 time.Time, log *saleLog, stop *atomic.Bool) {
	for !stop.Load() {
		a := claimOnce(client, base, vid, token, t0)
		log.add(user, a)
		if a.status == http.StatusOK || a.code == "outcome_unknown" {
			return
		}
		time.Sleep(20 * time.Millisecond) // a person's retry, not synchronisation
	}
}

// TestFailoverOfAMasterMidStampede kills -9 the Redis master that holds a
// live sale's slot while users stampede it, on a cluster of three masters with
// a replica each, and measures what the users see: no 500, no answer slower
// than the claim's budget, the sale selling again within seconds of the
// replica's promotion, a sale on another master selling throughout, and exact
// books once the orders are in MySQL (every order answered is created, once
// per user, and Redis and MySQL agree on the stock).
func TestFailoverOfAMasterMidStampede(t *testing.T) {
	const (
		stock   = 3000
		users   = 5000
		others  = 6000 // users of the sale on another master
		workers = 16
		// nodeTimeout is how long the cluster waits before it fails a
		// silent master over (the replica is promoted about 1-2 timeouts
		// after the kill).
		nodeTimeout = 2 * time.Second
	)
	rc := testenv.StartRedisCluster(t, 3, 1, nodeTimeout)
	c := newClusterOn(t, rc.Client(), "SECKILL_REDIS_CLUSTER_ADDRS="+rc.Seeds(), "SECKILL_QUEUE=stream")
	p := c.start("a")

	// Two sales on different masters: A's master is killed, B's is not.
	a := p.createVoucher(t, stock)
	masterA := rc.MasterOf(redisschema.KeysFor(c.prefix, a).Voucher)
	var b domain.VoucherID
	for range 20 {
		v := p.createVoucher(t, 1_000_000)
		if rc.MasterOf(redisschema.KeysFor(c.prefix, v).Voucher) != masterA {
			b = v
			break
		}
	}
	if b == 0 {
		t.Fatal("no voucher landed on another master in 20 tries")
	}
	replicaA := rc.ReplicaOf(masterA)
	tokens := c.mint(users+others, 1)

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers + 8}}
	t0 := time.Now()
	logA, logB := newSaleLog(), newSaleLog()
	var stopB, never atomic.Bool

	// B: a steady stream of buyers for the whole test, each pressing once
	// (one whose session lives on the dead master is answered busy and
	// would come back after Retry-After; the sale goes on meanwhile).
	var wgB sync.WaitGroup
	var nextB atomic.Int64
	for range 8 {
		wgB.Add(1)
		go func() {
			defer wgB.Done()
			for !stopB.Load() {
				i := int(nextB.Add(1)) - 1
				if i >= others {
					return
				}
				logB.add(i, claimOnce(client, p.base, b, tokens[users+i], t0))
				time.Sleep(20 * time.Millisecond) // pacing: B must last the whole test
			}
		}()
	}

	// A: the sale; its master dies when a third of the stock is sold.
	var wgA sync.WaitGroup
	var nextA atomic.Int64
	for range workers {
		wgA.Add(1)
		go func() {
			defer wgA.Done()
			for {
				i := int(nextA.Add(1)) - 1
				if i >= users {
					return
				}
				buyUntilAnswered(client, p.base, a, tokens[i], i, t0, logA, &never)
				// Pacing: the sale must still be selling when its master
				// dies and after its replica takes over (about 350 claims/s).
				time.Sleep(40 * time.Millisecond)
			}
		}()
	}
	testenv.Eventually(t, 60*time.Second, func() (bool, string) {
		logA.mu.Lock()
		defer logA.mu.Unlock()
		return len(logA.won) >= stock/3, fmt.Sprintf("%d sold on A", len(logA.won))
	})
	killedAt := time.Since(t0)
	masterA.Kill9()
	promoted := rc.WaitMasterChange(redisschema.KeysFor(c.prefix, a).Voucher, masterA, 30*time.Second)
	promotedAt := time.Since(t0)
	if promoted != replicaA {
		t.Logf("slot moved to %s, not to the replica %s", promoted.Addr(), replicaA.Addr())
	}
	wgA.Wait()
	stopB.Store(true)
	wgB.Wait()

	// B's books, on their own and at once: its master lived, so every order
	// it answered reaches MySQL as fast as when nothing failed. (One read
	// pipelined with the dead master's once stranded a B order pending to
	// no reader until XAUTOCLAIM took it, 30 s later.)
	resolvedB := resolveUnknown(t, p, tokens[users:], logB)
	wantB := len(logB.won) + resolvedB
	testenv.Eventually(t, 5*time.Second, func() (bool, string) {
		bk := c.books(b)
		return bk.orders == wantB && bk.redisStock == bk.dbStock, fmt.Sprintf("%+v, want %d orders", bk, wantB)
	})
	checkOrdersCreated(t, c, logB.won)
	if bk := c.books(b); bk.orders != bk.users || bk.dbStock != 1_000_000-bk.orders || bk.buyers != bk.orders || bk.failures != 0 {
		t.Errorf("books of the sale on the master that lived: %+v (%d answered success, %d unknown taken)", bk, len(logB.won), resolvedB)
	}

	all := append(append([]answer(nil), logA.answers...), logB.answers...)
	var worst time.Duration
	statuses := map[string]int{}
	for _, x := range all {
		statuses[fmt.Sprintf("%d %s", x.status, x.code)]++
		worst = max(worst, x.took)
	}
	lastFailA := lastFailure(logA.answers)
	gapB := longestGapBetweenSuccesses(logB.answers)
	t.Logf("killed at %s, replica promoted at %s (%s later); answers %v", killedAt.Round(time.Millisecond),
		promotedAt.Round(time.Millisecond), (promotedAt - killedAt).Round(time.Millisecond), statuses)
	t.Logf("A: %d sold, %d unknown, last failed claim %s after the kill; B: %d sold, longest gap between sales %s; slowest answer %s",
		len(logA.won), len(logA.unknown), (lastFailA - killedAt).Round(time.Millisecond),
		len(logB.won), gapB.Round(time.Millisecond), worst.Round(time.Millisecond))

	for k, n := range statuses {
		if k != "200 " && k != "200 sold_out" && k != "200 duplicate" && k != "503 busy" && k != "503 outcome_unknown" {
			t.Errorf("%d answers were %q: a claim answers an order, a refusal, or 503 busy/outcome_unknown, never anything else while Redis fails over", n, k)
		}
	}
	if budget := application.ClaimBudget + time.Second; worst > budget {
		t.Errorf("the slowest claim took %s; every claim must answer within its %s budget (+1 s for HTTP on a loaded machine)", worst, application.ClaimBudget)
	}
	if w := lastFailA - killedAt; w > 10*time.Second {
		t.Errorf("claims on the failed-over sale kept failing for %s after the kill; want at most 10 s", w)
	}
	if last := lastSuccess(logB.answers); last < promotedAt {
		t.Errorf("the sale on a healthy master stopped selling at %s, before the failover ended (%s): the gap measures nothing", last, promotedAt)
	}
	if gapB > 3*time.Second {
		t.Errorf("the sale on a healthy master went %s without a sale; want at most 3 s", gapB)
	}

	// The books, once every order reached MySQL. With WAIT off (as here) a
	// claim the old master answered in the instant before its death may
	// never have reached the replica: that order is lost, its unit sold
	// again, and its user not left marked (GUARANTEES.md, durability). Only
	// an answer received just before the kill can be such a loss (a killed
	// master sends nothing after); everything answered otherwise is in
	// MySQL, once per user, and Redis and MySQL agree on the stock.
	resolved := resolveUnknown(t, p, tokens, logA)
	want := len(logA.won) + resolved
	var lost []answer
	testenv.Eventually(t, 60*time.Second, func() (bool, string) {
		bk := c.books(a)
		lost = lostAnswers(t, c, logA)
		return bk.orders+len(lost) == want && bk.redisStock == bk.dbStock,
			fmt.Sprintf("%+v and %d answered success missing, want %d orders", bk, len(lost), want)
	})
	bk := c.books(a)
	if bk.orders != bk.users || bk.dbStock != stock-bk.orders || bk.buyers != bk.orders || bk.failures != 0 {
		t.Errorf("books of the failed-over sale: %+v (%d answered success, %d unknown taken)", bk, len(logA.won), resolved)
	}
	for _, x := range lost {
		if got := x.at + x.took; got > killedAt || got < killedAt-lossWindow {
			t.Errorf("an order answered success at %s is not in MySQL: only one answered in the %s before the kill at %s may be lost",
				got.Round(time.Millisecond), lossWindow, killedAt.Round(time.Millisecond))
		}
	}
	t.Logf("%d of %d orders answered success were lost with the old master (WAIT off)", len(lost), len(logA.won))
}

// lossWindow bounds how long before a master's death a claim it answered
// may still be missing from its replica (on loopback the replica follows
// within milliseconds; a loaded machine stretches that).
const lossWindow = time.Second

// lostAnswers are the claims l answered success whose order is not in MySQL.
func lostAnswers(t *testing.T, c *cluster, l *saleLog) []answer {
	t.Helper()
	created := createdOrders(t, c)
	l.mu.Lock()
	defer l.mu.Unlock()
	var lost []answer
	for _, x := range l.answers {
		if x.ok() && !created[int64(x.order)] {
			lost = append(lost, x)
		}
	}
	return lost
}

// lastFailure is when the last claim that did not get a final answer was sent.
func lastFailure(as []answer) time.Duration {
	var last time.Duration
	for _, a := range as {
		if a.status != http.StatusOK {
			last = max(last, a.at)
		}
	}
	return last
}

// lastSuccess is when the last successful claim was answered.
func lastSuccess(as []answer) time.Duration {
	var last time.Duration
	for _, a := range as {
		if a.ok() {
			last = max(last, a.at+a.took)
		}
	}
	return last
}

// longestGapBetweenSuccesses is the longest time between two successive
// successful claims' answers.
func longestGapBetweenSuccesses(as []answer) time.Duration {
	var at []time.Duration
	for _, a := range as {
		if a.ok() {
			at = append(at, a.at+a.took)
		}
	}
	sort.Slice(at, func(i, j int) bool { return at[i] < at[j] })
	var gap time.Duration
	for i := 1; i < len(at); i++ {
		gap = max(gap, at[i]-at[i-1])
	}
	return gap
}

// resolveUnknown asks the status of every order whose claim answered
// outcome_unknown, as its user would, and returns how many were taken.
func resolveUnknown(t *testing.T, p *proc, tokens []string, l *saleLog) int {
	t.Helper()
	taken := 0
	for user, id := range l.unknown {
		var state string
		testenv.Eventually(t, 30*time.Second, func() (bool, string) {
			status, env := call(t, http.DefaultClient, http.MethodGet, fmt.Sprintf("%s/voucher-order/%d", p.base, id), tokens[user], nil)
			switch {
			case status == http.StatusNotFound:
				state = "not_found"
				return true, ""
			case status == http.StatusOK:
				var o struct {
					State string `json:"state"`
				}
				_ = json.Unmarshal(env.Data, &o)
				state = o.State
				return state == "created", state
			}
			return false, fmt.Sprintf("status %d %s", status, env.Code)
		})
		if state == "created" {
			taken++
		}
	}
	return taken
}

// checkOrdersCreated: every order answered success is in MySQL under its id.
func checkOrdersCreated(t *testing.T, c *cluster, won map[int]domain.OrderID) {
	t.Helper()
	created := createdOrders(t, c)
	lost := 0
	for _, id := range won {
		if !created[int64(id)] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d orders answered success are not in MySQL", lost)
	}
}
