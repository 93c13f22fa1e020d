package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

// The sold-out edge. In a stampede nearly every claim arrives after the
// stock is gone, and this instance answers it "sold out" from its local
// mark. Through chi and the middleware chain that answer cost three copies
// of the request (the access log's context, the observer's, chi's route
// context), the route lookup, six middleware closures and the error table;
// measured under wrk, about half of the service's CPU per sold-out answer.
//
// The edge, in front of the router, answers those claims with the same
// checks in the same order as the chain: the per-IP limit, then the claim's
// own sold-out step (application.ClaimSeckill.SoldOut, which records the
// answer for the live page as a claim would), before the session is
// resolved (stock is public; a claim without a token still gets its 401).
// It tells the metrics through the observer and writes the access log's
// line (accessLog), as scope does. Anything else, and a claim of a voucher still selling,
// goes on to the router unchanged.
type soldOutEdge struct {
	a    *api
	next http.Handler
	// ip is the claim routes' per-IP limit (nil without one): the edge
	// counts the claims it looks at, so the router's copy of the limit
	// skips them (edgeClaim), and refuse answers those over it through
	// the access log and the observer, as the router would.
	ip      *slidingLimit[ipLimitKey]
	refuse  http.Handler
	soldOut answer
}

func (e *soldOutEdge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := edgeClaim(r)
	if !ok {
		e.next.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	if e.ip != nil && !e.ip.allow(e.a.ipKey(r), start) {
		e.refuse.ServeHTTP(w, r)
		return
	}
	if !e.a.Claim.SoldOut(id) {
		e.next.ServeHTTP(w, r)
		return
	}
	body := e.soldOut.body
	if len(r.Header["Accept-Language"]) > 0 && wantsEnglish(r) {
		body = e.soldOut.bodyEn
	}
	writeBody(w, http.StatusOK, body)
	took := time.Since(start)
	if obs := e.a.ClaimObserver; obs != nil {
		obs.ClaimAnswered(r.Context(), domain.ErrSoldOut.Code(), took)
	}
	e.a.accessLog(r, edgeRequestID, http.StatusOK, nil, took)
}

// edgeClaim tells whether the edge looks at r: a claim (POST to the claim
// route with a positive id in plain digits, exactly as the router would
// route it) with no body and a token header. It is the voucher's id.
func edgeClaim(r *http.Request) (domain.VoucherID, bool) {
	if r.Method != http.MethodPost || r.ContentLength != 0 || r.URL.RawPath != "" {
		return 0, false
	}
	s, ok := strings.CutPrefix(r.URL.Path, claimPathPrefix)
	// 18 digits always fit an int64; a longer id takes the router's path,
	// which says why it is refused.
	if !ok || len(s) == 0 || len(s) > 18 || !allDigits(s) || firstHeader(r, authorizationHeader) == "" {
		return 0, false
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return domain.VoucherID(n), n > 0
}

// edgeRequestID names an edge answer's log line as the access log would.
func edgeRequestID(r *http.Request) string {
	if id := clientRequestID(r); id != "" {
		return id
	}
	return formatRequestID(requestIDs.seq.Add(1))
}
