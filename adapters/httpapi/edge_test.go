package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/domain"
)

// sellOut sells voucher's one unit and has the gate answer the next claim
// sold out, which marks it: the edge answers it from then on. Its claims
// come from an address of their own, so they spend no test's per-IP limit.
func (e *env) sellOut(t *testing.T, voucher string) {
	t.Helper()
	const from = "203.0.113.200:4000"
	path := "/voucher-order/seckill/" + voucher
	if res := e.do(req{method: "POST", path: path, token: e.token(990_001), remote: from}); !res.Success {
		t.Fatalf("selling the last unit: %s", res.raw)
	}
	wantRefusal(t, e.do(req{method: "POST", path: path, token: e.token(990_002), remote: from}), http.StatusOK, "sold_out", "")
	if e.counter.Saved() != 0 {
		t.Fatalf("a claim was answered from the mark before the gate said sold out")
	}
}

// answers records what the claim observer is told.
type answers struct {
	mu    sync.Mutex
	codes map[string]int
}

func (a *answers) ClaimStarted(ctx context.Context) context.Context { return ctx }
func (a *answers) ClaimAnswered(_ context.Context, code string, _ time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.codes == nil {
		a.codes = map[string]int{}
	}
	a.codes[code]++
}

func (a *answers) get(code string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.codes[code]
}

// A claim of a voucher this instance marks sold out is answered before the
// router, with no session lookup and no port called; counted by the claim's
// recorder and told to the observer. A claim without a token still gets its 401, and
// a claim the edge does not take (a body, an escaped path) goes through the
// router as before.
func TestSoldOutEdgeAnswersBeforeTheSession(t *testing.T) {
	obs := &answers{}
	e := newEnv(t, options{observer: obs, marks: true})
	voucher := e.addVoucher(1, 1)
	e.sellOut(t, voucher)
	soldOut, observed := e.counter.Claims(mustID(t, voucher))["sold_out"], obs.get("sold_out")
	before, lookups := e.calls.snapshot(), e.lookups.Load()
	wantRefusal(t, e.claim(voucher, "a-token-never-seen"), http.StatusOK, "sold_out", "库存不足")
	if e.lookups.Load() != lookups || !equalCounts(before, e.calls.snapshot()) {
		t.Fatalf("a sold-out claim looked up %d sessions and called the ports %v -> %v", e.lookups.Load()-lookups, before, e.calls.snapshot())
	}
	if saved, counted, told := e.counter.Saved(), e.counter.Claims(mustID(t, voucher))["sold_out"]-soldOut, obs.get("sold_out")-observed; saved != 1 || counted != 1 || told != 1 {
		t.Fatalf("the sold-out answer was counted %d times from the mark, %d for the page and %d by the observer; want 1, 1 and 1", saved, counted, told)
	}
	if res := e.claim(voucher, ""); res.status != http.StatusUnauthorized {
		t.Fatalf("a claim without a token: %d %s; want 401", res.status, res.raw)
	}
	// Not the edge's: the router answers them, as it would without a mark.
	wantRefusal(t, e.do(req{method: "POST", path: "/voucher-order/seckill/%31", token: e.token(2)}), http.StatusBadRequest, "bad_request", "")
	if res := e.do(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: e.token(3), body: `{}`}); e.lookups.Load() == lookups {
		t.Fatalf("a claim with a body did not go through the router: %s", res.raw)
	}
	// A voucher still selling: the router claims it.
	other := e.addVoucher(1, 10)
	if res := e.claim(other, e.token(4)); !res.Success {
		t.Fatalf("a claim of a voucher on sale: %s", res.raw)
	}
}

func mustID(t *testing.T, s string) domain.VoucherID {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return domain.VoucherID(n)
}

// The edge counts the claims it looks at against the claim routes' per-IP
// limit, once: a claim it passes on to the router is not counted again
// there (which would halve the limit for claims of a voucher on sale), and
// the limit is one budget with the other routes of the group.
func TestSoldOutEdgeSharesThePerIPLimit(t *testing.T) {
	const limit = 4
	obs := &answers{}
	e := newEnv(t, options{observer: obs, marks: true, limits: httpapi.Limits{PerIP: limit, Window: time.Hour}})
	selling := e.addVoucher(1, 100)
	for u := 0; u < limit; u++ {
		if res := e.claim(selling, e.token(int64(10+u))); !res.Success {
			t.Fatalf("claim %d of %d within the per-IP limit: %s", u+1, limit, res.raw)
		}
	}
	res := e.claim(selling, e.token(20))
	wantRefusal(t, res, http.StatusTooManyRequests, "rate_limited", "")
	if res.retryAfter == "" || obs.get("rate_limited") != 1 {
		t.Fatalf("the edge's refusal: Retry-After %q, observed %d times", res.retryAfter, obs.get("rate_limited"))
	}
	// Another route of the group shares the budget.
	wantRefusal(t, e.do(req{method: "GET", path: "/voucher-order/1", token: e.token(10)}), http.StatusTooManyRequests, "rate_limited", "")

	// Sold-out answers count against it too, from another address.
	soldOut := e.addVoucher(1, 1)
	e.sellOut(t, soldOut)
	from := "198.51.100.9:4000"
	for u := 0; u < limit; u++ {
		wantRefusal(t, e.do(req{method: "POST", path: "/voucher-order/seckill/" + soldOut, token: "t", remote: from}), http.StatusOK, "sold_out", "")
	}
	wantRefusal(t, e.do(req{method: "POST", path: "/voucher-order/seckill/" + soldOut, token: "t", remote: from}), http.StatusTooManyRequests, "rate_limited", "")
	if yes := e.counter.Saved(); yes != limit {
		t.Fatalf("the mark counted %d sold-out answers, want %d (a refused claim is not one)", yes, limit)
	}
}

// An answer from the edge allocates nothing of its own: the router's path
// (context copies, route lookup, envelope) is what it saves. Counted beside
// a handler that writes the same answer into the same kind of recorder.
func TestSoldOutEdgeAllocations(t *testing.T) {
	e := newEnv(t, options{quiet: true, marks: true, observer: &answers{},
		limits: httpapi.Limits{PerUser: 1 << 30, PerIP: 1 << 30, Window: time.Hour}})
	voucher := e.addVoucher(1, 1)
	e.sellOut(t, voucher)
	r := httptest.NewRequest("POST", "/voucher-order/seckill/"+voucher, nil)
	r.Header.Set("authorization", "any")
	body := []byte(`{"success":false,"errorMsg":"库存不足","code":"sold_out"}`)
	bare := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Content-Type"] = []string{"application/json"}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	})
	allocs := func(h http.Handler) float64 {
		return testing.AllocsPerRun(200, func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK || w.Body.String() != string(body) {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
		})
	}
	edge, floor := allocs(e.h), allocs(bare)
	t.Logf("%.1f allocations per sold-out answer at the edge, %.1f writing it bare", edge, floor)
	if edge > floor+raceAllocs {
		t.Fatalf("%.1f allocations per sold-out answer at the edge, %.1f writing it bare: the edge allocates", edge, floor)
	}
}
