package component_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/test/testenv"
)

// claimTally keeps what each user of a stampede was told, as the user's
// client keeps it. A win, sold_out and duplicate are final. busy and
// rate_limited (nothing was taken) and outcome_unknown (a loaded machine ran
// the claim past its budget: it may have taken a unit) ask the client to
// press again; an outcome_unknown's order id is then looked up as its buyer
// would, GET /voucher-order/{id}, which knows an order from the moment a claim
// took its unit and answers 404 otherwise. Users are indexes into tokens.
type claimTally struct {
	t      *testing.T
	client *http.Client
	base   string // the service
	claim  string // the claim's URL
	tokens []string

	mu      sync.Mutex
	won     map[int]string   // user → the order id it holds
	unknown map[int][]string // user → order ids answered outcome_unknown, not yet looked up
	codes   map[string]int   // the answers that were not a win, by code
}

func newClaimTally(t *testing.T, client *http.Client, base, claimURL string, tokens []string) *claimTally {
	return &claimTally{t: t, client: client, base: base, claim: claimURL, tokens: tokens,
		won: map[int]string{}, unknown: map[int][]string{}, codes: map[string]int{}}
}

// press claims once as user i and records the answer; it tells whether the answer is final.
func (c *claimTally) press(i int) (envelope, bool) {
	status, env := postJSON(c.t, c.client, c.claim, c.tokens[i], nil)
	return env, c.record(i, status, env)
}

func (c *claimTally) record(i, status int, env envelope) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var id string
	if env.Success || env.Code == "outcome_unknown" {
		if err := json.Unmarshal(env.Data, &id); err != nil || id == "" {
			c.t.Errorf("user %d: an order id in %s (%v)", i, env.Data, err)
		}
	}
	switch {
	case status == http.StatusOK && env.Success:
		c.win(i, id)
		return true
	case status == http.StatusOK && (env.Code == "sold_out" || env.Code == "duplicate"):
		c.codes[env.Code]++
		return true
	case status == http.StatusServiceUnavailable && env.Code == "outcome_unknown":
		c.unknown[i] = append(c.unknown[i], id)
		fallthrough
	case status == http.StatusServiceUnavailable && env.Code == "busy",
		status == http.StatusTooManyRequests && env.Code == "rate_limited":
		c.codes[env.Code]++
		return false
	}
	c.t.Errorf("user %d: HTTP %d %+v", i, status, env)
	return true
}

// win records user i's order; a second one is an oversold place. Under c.mu.
func (c *claimTally) win(i int, id string) {
	if prev, dup := c.won[i]; dup && prev != id {
		c.t.Errorf("user %d won twice: orders %s and %s", i, prev, id)
	}
	c.won[i] = id
}

// stampede has every user press presses times at once, then has those not
// yet answered finally press again, and resolves the outcome_unknown orders.
func (c *claimTally) stampede(presses int) {
	final := make([]atomic.Bool, len(c.tokens))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range c.tokens {
		for range presses {
			wg.Go(func() {
				<-start
				if _, ok := c.press(i); ok {
					final[i].Store(true)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for i := range c.tokens {
		if !final[i].Load() {
			c.settle(i)
		}
	}
	c.resolve()
	c.t.Logf("%d users hold an order; the other answers: %v", len(c.won), c.codes)
}

// settle presses as user i, again as busy's Retry-After says, until its answer is final.
func (c *claimTally) settle(i int) (env envelope) {
	testenv.Eventually(c.t, 30*time.Second, func() (final bool, _ string) {
		env, final = c.press(i)
		return final, fmt.Sprintf("user %d: no final answer (the last %+v)", i, env)
	})
	return env
}

// resolve looks up every outcome_unknown order as its buyer; one the service
// knows is the buyer's win.
func (c *claimTally) resolve() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ids := range c.unknown {
		for _, id := range ids {
			req, err := http.NewRequest(http.MethodGet, c.base+"/voucher-order/"+id, nil)
			if err != nil {
				c.t.Fatal(err)
			}
			req.Header.Set("authorization", c.tokens[i])
			var status int
			testenv.Eventually(c.t, 30*time.Second, func() (bool, string) {
				resp, err := c.client.Do(req)
				if err != nil {
					return false, err.Error()
				}
				resp.Body.Close()
				status = resp.StatusCode
				return status == http.StatusOK || status == http.StatusNotFound, fmt.Sprintf("GET order %s: HTTP %d", id, status)
			})
			if status == http.StatusOK {
				c.win(i, id)
			}
		}
	}
	clear(c.unknown)
}
