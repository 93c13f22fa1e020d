package httpapi

import (
	"cmp"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

// soldOutEdge answers, in front of the router, the claims of a voucher this
// instance marks sold out (in a stampede nearly all; through chi, half the
// CPU each). It checks the per-IP limit, then ClaimSeckill.SoldOut, before the
// session (stock is public), and tells the observer and access log as scope does.
type soldOutEdge struct {
	a    *api
	next http.Handler
	// ip (nil: none) counts the claims the edge looks at (the router's then skips them); refuse answers over it.
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

// edgeClaim is the voucher of r if the edge looks at it: a claim as routed, with no body and a token header.
func edgeClaim(r *http.Request) (domain.VoucherID, bool) {
	if r.Method != http.MethodPost || r.ContentLength != 0 || r.URL.RawPath != "" {
		return 0, false
	}
	s, ok := strings.CutPrefix(r.URL.Path, claimPathPrefix)
	// 18 digits always fit an int64; a longer id is the router's to refuse.
	if !ok || len(s) == 0 || len(s) > 18 || !allDigits(s) || firstHeader(r, authorizationHeader) == "" {
		return 0, false
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return domain.VoucherID(n), n > 0
}

func edgeRequestID(r *http.Request) string {
	return cmp.Or(clientRequestID(r), formatRequestID(requestIDs.seq.Add(1)))
}
