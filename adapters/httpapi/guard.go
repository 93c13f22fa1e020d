package httpapi

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Limits are the per-user and per-client-IP rate limits on claim and order
// status: how many requests each may make per sliding Window. A zero count
// turns that limit off; a zero Window turns both off.
type Limits struct {
	PerUser int
	PerIP   int
	Window  time.Duration
}

// Refusals of this file's middleware; errorTable maps them to answers.
var (
	errForbidden   = errors.New("not an admin")
	errRateLimited = errors.New("rate limited")
)

// requireAdmin lets through only the users named in Deps.Admins and those
// whose identity provider's token names them admins; it runs behind
// requireUser, so the caller is known. With neither configured it refuses
// everyone: an open admin endpoint is never the default.
func (a *api) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := callerFrom(r.Context()); !c.admin && !slices.Contains(a.Admins, c.user) {
			a.fail(w, r, fmt.Errorf("user %d: %w", c.user, errForbidden))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireJSON refuses a write whose body is not declared JSON. Browsers send
// text/plain, form and multipart bodies cross-site without a preflight (a
// no-cors fetch), so any page a user visits could otherwise post here from
// their browser, reaching a service on their loopback or intranet; JSON
// needs a preflight, which this service never grants. A bodiless POST, such
// as the original front end's claim (axios sends Content-Length: 0), has
// nothing to misread and passes.
func (a *api) requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// ContentLength is -1 for a body of unknown length (chunked), which
		// is a body too.
		if r.ContentLength != 0 && r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := checkJSONType(r); err != nil {
				a.fail(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// checkJSONType accepts application/json, with parameters such as charset,
// and the structured +json types, which no browser sends without a preflight.
func checkJSONType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return &requestError{
			status: http.StatusUnsupportedMediaType,
			code:   codeUnsupportedMediaType,
			msg:    fmt.Sprintf("Content-Type must be application/json, got %q", ct),
		}
	}
	return nil
}

func (a *api) rateLimited(w http.ResponseWriter, r *http.Request) {
	a.fail(w, r, errRateLimited)
}

// proxyWarnEvery spaces the unconfigured-proxy warnings out.
const proxyWarnEvery = time.Minute

// ipRateLimited is the per-IP limit's refusal. Behind a reverse proxy that is
// not in SECKILL_TRUSTED_PROXIES every user arrives from the proxy's address
// and shares one budget, which silently throttles a whole sale; a loopback or
// private peer over the limit, with no proxy trusted, looks like that, so it
// is logged (at most once per proxyWarnEvery) with the variable to set.
func (a *api) ipRateLimited(w http.ResponseWriter, r *http.Request) {
	a.fail(w, r, errRateLimited)
	if len(a.TrustedProxies) > 0 {
		return
	}
	peer, ok := parseRemoteAddr(r.RemoteAddr)
	if !ok || !(peer.IsLoopback() || peer.IsPrivate()) {
		return
	}
	now := time.Now().UnixNano()
	last := a.proxyWarned.Load()
	if last != 0 && now-last < int64(proxyWarnEvery) || !a.proxyWarned.CompareAndSwap(last, now) {
		return
	}
	a.Log.Warn().Str("peer", peer.String()).Int("limit", a.Limits.PerIP).Str("window", a.Limits.Window.String()).
		Msg("the per-IP rate limit refused a loopback or private address: if it is a reverse proxy, every client " +
			"behind it shares this one budget; set SECKILL_TRUSTED_PROXIES to the proxy's address so its " +
			"X-Forwarded-For names the clients (or SECKILL_RATE_IP=0 to turn the per-IP limit off)")
}
