package e2e_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestClaimsAnswerWithinTheirBudgetWhenRedisStallsOrDies runs the service on
// a Redis of the test's own, then stalls it (SIGSTOP) and later kills it -9
// and starts it again empty, while users claim. What they see: within the
// claim's budget, a 503 busy (nothing taken) or outcome_unknown (with an
// order id the status endpoint resolves), never a 500 and never a hang; and
// once Redis is back, claims succeed again and every order answered is in
// MySQL.
func TestClaimsAnswerWithinTheirBudgetWhenRedisStallsOrDies(t *testing.T) {
	for _, queue := range []string{"stream", "channel"} {
		t.Run(queue, func(t *testing.T) {
			own := testenv.StartRedis(t)
			c := newClusterOn(t, own.Client(), "SECKILL_REDIS_URL="+own.URL(), "SECKILL_QUEUE="+queue)
			p := c.start("a")
			v := p.createVoucher(t, 1_000_000)
			tokens := c.mint(700, 1)
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			t0 := time.Now()
			log := newSaleLog()
			stampede := func(from, to int) []answer {
				var (
					wg  sync.WaitGroup
					mu  sync.Mutex
					out []answer
				)
				for i := from; i < to; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						a := claimOnce(client, p.base, v, tokens[i], t0)
						log.add(i, a)
						mu.Lock()
						out = append(out, a)
						mu.Unlock()
					}()
				}
				wg.Wait()
				return out
			}
			if got := stampede(0, 100); countOK(got) != 100 {
				t.Fatalf("healthy Redis: %d of 100 claims succeeded: %v", countOK(got), codes(got))
			}
			testenv.Eventually(t, 30*time.Second, func() (bool, string) {
				b := c.books(v)
				return b.orders == 100, fmt.Sprintf("%d orders in MySQL", b.orders)
			})

			own.Stall()
			stalled := stampede(100, 300)
			own.Resume()
			checkFaultAnswers(t, "stalled", stalled)
			waitSelling(t, client, p, v, tokens, 600, 650, t0, log)
			// What was sold so far reaches MySQL before Redis dies: this Redis
			// keeps nothing on disk, so an order still in its stream would die
			// with it (docs/GUARANTEES.md, the durability table).
			waitCommitted(t, c, log)

			own.Kill9()
			dead := stampede(300, 500)
			checkFaultAnswers(t, "killed", dead)
			own.Restart() // empty: the service rebuilds the gate from MySQL
			// The sessions were in that Redis too: the users log in again.
			copy(tokens, c.mint(len(tokens), 1))
			waitSelling(t, client, p, v, tokens, 650, 700, t0, log)

			resolved := resolveUnknown(t, p, tokens, log)
			want := len(log.won) + resolved
			testenv.Eventually(t, 30*time.Second, func() (bool, string) {
				b := c.books(v)
				return b.orders == want, fmt.Sprintf("%+v, want %d orders", b, want)
			})
			checkOrdersCreated(t, c, log.won)
			t.Logf("stalled: %v; killed: %v; %d unknown outcomes of which %d were taken", codes(stalled), codes(dead), len(log.unknown), resolved)
		})
	}
}

// checkFaultAnswers: while Redis is stalled or down, every claim answers 503
// busy or outcome_unknown within its budget.
func checkFaultAnswers(t *testing.T, what string, as []answer) {
	t.Helper()
	var worst time.Duration
	for _, a := range as {
		worst = max(worst, a.took)
		if a.status != http.StatusServiceUnavailable || (a.code != "busy" && a.code != "outcome_unknown") {
			t.Errorf("Redis %s: a claim answered %d %q; want 503 busy or outcome_unknown", what, a.status, a.code)
		}
		if a.code == "outcome_unknown" && a.order == 0 {
			t.Errorf("Redis %s: outcome_unknown without an order id", what)
		}
	}
	if limit := application.ClaimBudget + time.Second; worst > limit {
		t.Errorf("Redis %s: the slowest claim took %s; want within the %s budget (+1 s for HTTP)", what, worst, application.ClaimBudget)
	}
	t.Logf("Redis %s: %v, slowest %s", what, codes(as), worst.Round(time.Millisecond))
}

// waitSelling waits until claims succeed again after a fault, each user
// pressing until answered.
func waitSelling(t *testing.T, client *http.Client, p *proc, v domain.VoucherID, tokens []string, from, to int, t0 time.Time, log *saleLog) {
	t.Helper()
	i := from
	testenv.Eventually(t, 60*time.Second, func() (bool, string) {
		if i >= to {
			t.Fatalf("%d users could not buy after the fault", to-from)
		}
		a := claimOnce(client, p.base, v, tokens[i], t0)
		log.add(i, a)
		if a.ok() || a.code == "outcome_unknown" {
			i++
		}
		return a.ok(), fmt.Sprintf("claim answered %d %s", a.status, a.code)
	})
}

// waitCommitted waits until every order answered success so far is in MySQL.
func waitCommitted(t *testing.T, c *cluster, log *saleLog) {
	t.Helper()
	log.mu.Lock()
	won := make([]int64, 0, len(log.won))
	for _, id := range log.won {
		won = append(won, int64(id))
	}
	log.mu.Unlock()
	testenv.Eventually(t, 30*time.Second, func() (bool, string) {
		created := createdOrders(t, c)
		for _, id := range won {
			if !created[id] {
				return false, fmt.Sprintf("order %d answered success is not in MySQL yet", id)
			}
		}
		return true, ""
	})
}

func countOK(as []answer) int {
	n := 0
	for _, a := range as {
		if a.ok() {
			n++
		}
	}
	return n
}

func codes(as []answer) map[string]int {
	m := map[string]int{}
	for _, a := range as {
		m[fmt.Sprintf("%d %s", a.status, a.code)]++
	}
	return m
}
