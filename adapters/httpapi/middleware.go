package httpapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// requestIDs names a request without a usable X-Request-Id as chi's RequestID does (<host>/<random>-<seq>).
var requestIDs = struct {
	prefix string
	seq    atomic.Uint64
}{prefix: func() string {
	host, err := os.Hostname()
	if host == "" || err != nil {
		host = "localhost"
	}
	var buf [5]byte
	_, _ = rand.Read(buf[:])
	return host + "/" + hex.EncodeToString(buf[:])
}()}

func requestID(r *http.Request) string { return RequestID(r.Context()) }

// RequestID is the id of the request ctx belongs to, or "" outside a request
// (a worker's context). Safe from any goroutine: it only reads the recorder.
func RequestID(ctx context.Context) string {
	switch rec := recorderOf(ctx); {
	case rec == nil:
		return ""
	case rec.requestID != "":
		return rec.requestID
	default:
		return formatRequestID(rec.seq)
	}
}

func formatRequestID(seq uint64) string { return fmt.Sprintf("%s-%06d", requestIDs.prefix, seq) }

const requestIDHeader = "X-Request-Id"

// clientRequestID is r's X-Request-Id if printable and short (every log line copies it), else "".
func clientRequestID(r *http.Request) string {
	if id := r.Header.Get(requestIDHeader); len(id) <= 64 && domain.Printable(id) {
		return id
	}
	return ""
}

// recorder is the request's state, put in its context once (no middleware copies the request); one goroutine writes it.
type recorder struct {
	http.ResponseWriter
	status    int // 0 until the header is written
	err       error
	requestID string // the client's, if usable
	seq       uint64 // for a made id
	caller    caller
	arrived   time.Time // a claim's budget counts from it, session lookup included
}

type recorderKey struct{}

// recorderOf is never nil in a handler: scope puts it in every request.
func recorderOf(ctx context.Context) *recorder {
	rec, _ := ctx.Value(recorderKey{}).(*recorder)
	return rec
}

func (rec *recorder) WriteHeader(status int) {
	rec.status = cmp.Or(rec.status, status)
	rec.ResponseWriter.WriteHeader(status)
}

func (rec *recorder) Write(b []byte) (int, error) {
	rec.status = cmp.Or(rec.status, http.StatusOK)
	return rec.ResponseWriter.Write(b)
}

func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// noteError hands err to the access log line.
func noteError(r *http.Request, err error) { recorderOf(r.Context()).err = err }

// scope is every request's entry: its one context (requestCtx), the claim observer, the access log line.
func (a *api) scope(next http.Handler) http.Handler {
	obs := a.ClaimObserver
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, seq: requestIDs.seq.Add(1), arrived: start, requestID: clientRequestID(r)}
		rc := &requestCtx{Context: r.Context(), rec: rec}
		if rc.Context.Value(chi.RouteCtxKey) == nil {
			// chi fills a wrapper's route context (tracing names spans by route); else one from a pool.
			rc.route = routeContexts.Get().(*chi.Context)
			rc.route.Reset()
			defer routeContexts.Put(rc.route)
		}
		var ctx context.Context = rc
		claim := obs != nil && r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, claimPathPrefix)
		if claim {
			ctx = obs.ClaimStarted(ctx)
		}
		r = r.WithContext(ctx)
		next.ServeHTTP(rec, r)
		took := time.Since(start)
		if claim {
			obs.ClaimAnswered(ctx, answeredCode(rec), took)
		}
		a.accessLog(r, requestID, cmp.Or(rec.status, http.StatusOK), rec.err, took)
	})
}

// accessLog logs 2xx-4xx at debug (refusals are normal in a sale, and the claim
// path must stay cheap), 503 at warn, other 5xx at error; id only if written.
func (a *api) accessLog(r *http.Request, id func(*http.Request) string, status int, err error, took time.Duration) {
	level := zerolog.DebugLevel
	switch {
	case status == http.StatusServiceUnavailable:
		level = zerolog.WarnLevel
	case status >= 500:
		level = zerolog.ErrorLevel
	}
	if e := a.Log.WithLevel(level); e.Enabled() {
		e.Str("request_id", id(r)).Str("method", r.Method).Str("path", r.URL.Path).
			Int("status", status).Dur("duration", took).AnErr("error", err).Msg("http request")
	}
}

var routeContexts = sync.Pool{New: func() any { return chi.NewRouteContext() }}

// requestCtx holds the recorder and chi's route context in one allocation.
type requestCtx struct {
	context.Context
	rec   *recorder
	route *chi.Context // nil: the parent's is used
}

func (c *requestCtx) Value(key any) any {
	switch key {
	case recorderKey{}:
		return c.rec
	case chi.RouteCtxKey:
		if c.route != nil {
			return c.route
		}
	}
	return c.Context.Value(key)
}

// recoverer answers a panic with a 500 envelope, the panic and its stack going to the access log line.
func (a *api) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			err := fmt.Errorf("panic: %v\n%s", v, debug.Stack())
			if rec := recorderOf(r.Context()); rec.status != 0 {
				// Too late for an envelope; the client gets a truncated answer.
				rec.err = err
				return
			}
			a.fail(w, r, err)
		}()
		next.ServeHTTP(w, r)
	})
}

func (a *api) guard(check func(*http.Request) error) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := check(r); err != nil {
				a.fail(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func (a *api) refuse(err error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { a.fail(w, r, err) }
}

// limitBody refuses a body over MaxBodyBytes: by its declared length at once, else on reading (a 413).
func (a *api) limitBody(r *http.Request) error {
	if r.ContentLength > a.MaxBodyBytes {
		return errBodyTooLarge(a.MaxBodyBytes)
	}
	// No wrapper for the bodiless claim; the server's own writer lets MaxBytesReader close the connection.
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(recorderOf(r.Context()).ResponseWriter, r.Body, a.MaxBodyBytes)
	}
	return nil
}

func errBodyTooLarge(max int64) error {
	return &answer{status: http.StatusRequestEntityTooLarge, code: codeBadRequest,
		msg: fmt.Sprintf("request body is larger than %d bytes", max)}
}

// caller is who requireUser found behind the request's token.
type caller struct {
	user  domain.UserID
	admin bool // the identity provider's token says so (Deps.Admins apart)
}

var errNoToken = fmt.Errorf("no authorization header: %w", ports.ErrUnknownToken)

const bearerScheme = "Bearer " // an identity provider's token (RFC 6750: case-insensitive)

// requireUser resolves the bare `authorization: <token>` (or Deps.Bearer's `Bearer <JWT>`) to a user, or a 401.
func (a *api) requireUser(r *http.Request) error {
	token := firstHeader(r, authorizationHeader)
	if token == "" {
		return errNoToken
	}
	var c caller
	var err error
	if n := len(bearerScheme); a.Bearer != nil && len(token) > n && strings.EqualFold(token[:n], bearerScheme) {
		c.user, c.admin, err = a.Bearer.Session(r.Context(), token[n:])
	} else {
		c.user, err = a.Sessions.UserID(r.Context(), token)
	}
	switch {
	case err != nil && !errors.Is(err, ports.ErrUnknownToken):
		// Redis did not answer: nothing was done, a retry is safe.
		return fmt.Errorf("resolve session token: %w: %w", application.ErrBusy, err)
	case err != nil:
		return err
	case c.user <= 0:
		// A corrupt session must not become a 400 further down.
		return fmt.Errorf("session token resolved to invalid user %d", c.user)
	}
	recorderOf(r.Context()).caller = c
	return nil
}

func userFrom(ctx context.Context) domain.UserID { return recorderOf(ctx).caller.user }

// requireAdmin, behind requireUser, passes Deps.Admins and the identity provider's admins; others get a 403.
func (a *api) requireAdmin(r *http.Request) error {
	if c := recorderOf(r.Context()).caller; !c.admin && !slices.Contains(a.Admins, c.user) {
		return fmt.Errorf("user %d: %w", c.user, errForbidden)
	}
	return nil
}

// Canonical names, looked up in the map directly: http.Header.Get canonicalises its key on each call.
const (
	authorizationHeader = "Authorization"
	forwardedForHeader  = "X-Forwarded-For"
)

// firstHeader is http.Header.Get for a canonical key.
func firstHeader(r *http.Request, key string) string {
	if v := r.Header[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// ClaimObserver is told how every request to the claim route was answered,
// the edge's and the middlewares' refusals included (metrics implement it).
type ClaimObserver interface {
	// ClaimStarted may return a new context for the request, which
	// ClaimAnswered gets back with "success" or the refusal's or envelope's code.
	ClaimStarted(ctx context.Context) context.Context
	ClaimAnswered(ctx context.Context, code string, took time.Duration)
}

// claimPathPrefix, not chi's pattern, tells the observer a claim: a middleware may refuse before routing.
const claimPathPrefix = "/voucher-order/seckill/"

// answeredCode is the code of rec's error (fail records every refusal's), or
// "success" for a 2xx; a 3xx-5xx without one is not this router's: internal.
func answeredCode(rec *recorder) string {
	switch {
	case rec.err != nil:
		return answerFor(rec.err).code
	case rec.status < 300:
		return "success"
	}
	return codeInternal
}

// Limits are requests per sliding Window per user and per client IP, on claim
// and order status; a zero count turns that limit off, a zero Window both.
type Limits struct {
	PerUser, PerIP int
	Window         time.Duration
}

// requireJSON refuses a body not declared JSON, which any page could post through a user's browser
// without a preflight; a bodiless POST (the original's claim) passes, a chunked one is checked.
func (a *api) requireJSON(r *http.Request) error {
	if r.ContentLength != 0 && r.Method != http.MethodGet && r.Method != http.MethodHead {
		return checkJSONType(r)
	}
	return nil
}

// checkJSONType accepts application/json (with parameters) and +json types.
func checkJSONType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return &answer{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type",
			msg: fmt.Sprintf("Content-Type must be application/json, got %q", ct)}
	}
	return nil
}

// ipRateLimited is the per-IP refusal; a loopback or private peer with no proxy trusted looks
// like a proxy whose users share one budget, so it is logged (once a minute).
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
	if last != 0 && now-last < int64(time.Minute) || !a.proxyWarned.CompareAndSwap(last, now) {
		return
	}
	a.Log.Warn().Str("peer", peer.String()).Int("limit", a.Limits.PerIP).Str("window", a.Limits.Window.String()).
		Msg("the per-IP rate limit refused a loopback or private address: if it is a reverse proxy, every client " +
			"behind it shares this one budget; set SECKILL_TRUSTED_PROXIES to the proxy's address so its " +
			"X-Forwarded-For names the clients (or SECKILL_RATE_IP=0 to turn the per-IP limit off)")
}
