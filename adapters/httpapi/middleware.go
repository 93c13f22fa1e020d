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

// maxRequestIDLen bounds a client-supplied X-Request-Id, which would
// otherwise be copied into every log line whatever its size.
const maxRequestIDLen = 64

// requestIDs names the requests that come without a usable X-Request-Id the
// way chi's RequestID does (<host>/<random>-<sequence>), but only when
// something asks for the name: a log line, or a 5xx answer's header. A claim
// answered 2xx-4xx with debug logging off never formats one, and the request
// is not copied to carry it (the recorder, in the context once, holds it).
var requestIDs = struct {
	prefix string
	seq    atomic.Uint64
}{prefix: requestIDPrefix()}

func requestIDPrefix() string {
	host, err := os.Hostname()
	if host == "" || err != nil {
		host = "localhost"
	}
	var buf [5]byte
	_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails since Go 1.24
	return host + "/" + hex.EncodeToString(buf[:])
}

// requestID is RequestID of r's context.
func requestID(r *http.Request) string { return RequestID(r.Context()) }

// RequestID is the id of the request ctx belongs to, or "" for a context
// that is not a request's, such as a worker's: for a hook or a log line
// outside this package that wants to tie its work to the request that caused
// it. A made id is formatted on each call from the request's number, so the
// recorder is only read here, from any goroutine.
func RequestID(ctx context.Context) string {
	rec := recorderOf(ctx)
	switch {
	case rec == nil:
		return ""
	case rec.requestID != "":
		return rec.requestID
	}
	return formatRequestID(rec.seq)
}

// formatRequestID is the made id of the request numbered seq.
func formatRequestID(seq uint64) string {
	return requestIDs.prefix + "-" + fmt.Sprintf("%06d", seq)
}

const requestIDHeader = "X-Request-Id"

// clientRequestID is r's X-Request-Id when it is printable ASCII of at most
// maxRequestIDLen bytes, else "".
func clientRequestID(r *http.Request) string {
	id := r.Header.Get(requestIDHeader)
	if len(id) > maxRequestIDLen || !domain.Printable(id) {
		return ""
	}
	return id
}

// recorder keeps what the access log needs: the status, and the error the
// handler answered with, so that error is logged once, on the request's line.
//
// It is also the request's own state, put in its context once by scope:
// the request id (the client's, or its number, formatted only when asked
// for) and the user requireUser resolved, so neither copies the request to
// add a context value. Only the request's goroutine writes it.
type recorder struct {
	http.ResponseWriter
	status int // 0 until the header is written
	err    error

	requestID string // the client's, if usable
	seq       uint64 // this request's number, for a made id
	caller    caller // set by requireUser
	// arrived is when the request came in: a claim's budget counts from
	// it, so the session lookup spends the same budget as the claim.
	arrived time.Time
}

type recorderKey struct{}

// recorderOf is the request's recorder: scope puts it in the context of
// every request NewRouter serves, so a handler's is never nil.
func recorderOf(ctx context.Context) *recorder {
	rec, _ := ctx.Value(recorderKey{}).(*recorder)
	return rec
}

func (rec *recorder) WriteHeader(status int) {
	if rec.status == 0 {
		rec.status = status
	}
	rec.ResponseWriter.WriteHeader(status)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// noteError hands err to the access log, which writes it on the request's
// line.
func noteError(r *http.Request, err error) { recorderOf(r.Context()).err = err }

// scope is every request's entry: it gives the request its one context
// (requestCtx: the recorder, chi's route context and, for a claim, what the
// observer counts with: one copy of the request), tells Deps.ClaimObserver
// (if any) how each claim was answered, and writes the access log line
// (accessLog).
func (a *api) scope(next http.Handler) http.Handler {
	obs := a.ClaimObserver
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, seq: requestIDs.seq.Add(1), arrived: start,
			requestID: clientRequestID(r)}
		rc := &requestCtx{Context: r.Context(), rec: rec}
		if rc.Context.Value(chi.RouteCtxKey) == nil {
			// A route context already there is a wrapper's (tracing's,
			// which names its span by the route): chi fills that one.
			// Else one from the pool, as chi itself would take, whose
			// slices keep their room from one request to the next.
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

// accessLog writes a request's access log line, for scope and for the
// sold-out edge alike: debug for 2xx-4xx (refusals are normal business
// during a sale, and the claim path must stay cheap), warn for a 503 (load
// shedding, not ready) and error for other 5xx, with the error's detail
// that the client never sees. id names the request; it is asked only when
// the line is written.
func (a *api) accessLog(r *http.Request, id func(*http.Request) string, status int, err error, took time.Duration) {
	level := zerolog.DebugLevel
	switch {
	case status == http.StatusServiceUnavailable:
		level = zerolog.WarnLevel
	case status >= 500:
		level = zerolog.ErrorLevel
	}
	e := a.Log.WithLevel(level)
	if !e.Enabled() {
		return
	}
	e.Str("request_id", id(r)).
		Str("method", r.Method).
		Str("path", r.URL.Path).
		Int("status", status).
		Dur("duration", took)
	if err != nil {
		e.Err(err)
	}
	e.Msg("http request")
}

var routeContexts = sync.Pool{New: func() any { return chi.NewRouteContext() }}

// requestCtx is a request's context: its recorder and chi's route context
// answered from one value, in one allocation.
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

// recoverer turns a panic into a 500 envelope. chi's Recoverer answers a bare
// 500 and prints to stderr; here the panic and its stack go to the access log
// line instead.
func (a *api) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				// The server's way to abort a response: let it do so.
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

// guard is a middleware that answers check's refusal, or passes the request
// on.
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

// limitBody refuses a body larger than maxBody: at once when its declared
// length says so, on reading otherwise (the decoder then reports 413).
func (a *api) limitBody(r *http.Request) error {
	if r.ContentLength > a.MaxBodyBytes {
		return errBodyTooLarge(a.MaxBodyBytes)
	}
	// The claim path has no body: skip the wrapper and its allocation.
	if r.Body != nil && r.Body != http.NoBody {
		// The server's own writer, not the recorder, lets MaxBytesReader
		// tell the server to close the connection after the answer.
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
	user domain.UserID
	// admin: the identity provider's token named the user an admin (the
	// configured admin users are checked apart).
	admin bool
}

var errNoToken = fmt.Errorf("no authorization header: %w", ports.ErrUnknownToken)

// bearerScheme prefixes an identity provider's token (RFC 6750; the scheme
// is case-insensitive).
const bearerScheme = "Bearer "

// requireUser resolves the original's `authorization: <token>` header (the
// bare token, no scheme) to a user, or answers 401. With Deps.Bearer, a
// `Bearer <JWT>` is resolved by it instead.
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
	if err != nil {
		if !errors.Is(err, ports.ErrUnknownToken) {
			// Redis did not answer (down, failing over, out of the
			// request's budget): nothing was done, so the client may
			// retry; never a 500.
			return fmt.Errorf("resolve session token: %w: %w", application.ErrBusy, err)
		}
		return err
	}
	if c.user <= 0 {
		// A corrupt session must not become a 400 further down.
		return fmt.Errorf("session token resolved to invalid user %d", c.user)
	}
	recorderOf(r.Context()).caller = c
	return nil
}

// callerFrom is only called behind requireUser, which guarantees a user.
func callerFrom(ctx context.Context) caller { return recorderOf(ctx).caller }

func userFrom(ctx context.Context) domain.UserID { return callerFrom(ctx).user }

// refuse answers every request err.
func (a *api) refuse(err error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { a.fail(w, r, err) }
}

// Header names the claim path reads on every request, in their canonical
// form: net/http stores a request's headers under that form, so they are
// looked up in the map directly. http.Header.Get canonicalises its key on
// each call, 70 ns (a quarter of the per-IP limit's key) that a constant
// already canonical does not need.
const (
	authorizationHeader = "Authorization"
	forwardedForHeader  = "X-Forwarded-For"
)

// firstHeader is r's first value of the canonical header key, as
// http.Header.Get gives it.
func firstHeader(r *http.Request, key string) string {
	if v := r.Header[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// ClaimObserver is told how every request to the claim route was answered,
// including the answers the edge gives before the claim runs (no token, rate
// limited, bad path). Metrics implement it; the router calls it only when one
// is given, so without it the claim path pays nothing.
type ClaimObserver interface {
	// ClaimStarted may return a context carrying what the observer needs
	// (a counter its Redis hook increments); the request goes on with it,
	// and ClaimAnswered gets it back. Returning ctx itself costs nothing: the
	// request is copied only for a new context.
	ClaimStarted(ctx context.Context) context.Context
	// ClaimAnswered gets the answer's code: "success", a refusal's code, or
	// the code of the error envelope (unauthorized, rate_limited, busy,
	// internal ...), and how long the claim took.
	ClaimAnswered(ctx context.Context, code string, took time.Duration)
}

// claimPathPrefix is the claim route's path up to its id. The observer
// matches on it rather than on chi's route pattern, which is not set yet
// when a middleware in front of routing refuses the request.
const claimPathPrefix = "/voucher-order/seckill/"

// codeSuccess names a successful claim for observers; the envelope itself
// carries no code on success.
const codeSuccess = "success"

// answeredCode is the code of the answer rec recorded: the code its error
// maps to through the table, or "success" for a 2xx without error. Every
// refusal on the claim route (the limits', the session's, a bad path's) is
// written by fail, which records its error; a 3xx-5xx without one is no
// answer of this router's, so internal.
func answeredCode(rec *recorder) string {
	switch {
	case rec.err != nil:
		return answerFor(rec.err).code
	case rec.status < 300:
		return codeSuccess
	}
	return codeInternal
}

// Limits are the per-user and per-client-IP rate limits on claim and order
// status: how many requests each may make per sliding Window. A zero count
// turns that limit off; a zero Window turns both off.
type Limits struct {
	PerUser int
	PerIP   int
	Window  time.Duration
}

// requireAdmin lets through only the users named in Deps.Admins and those
// whose identity provider's token names them admins; it runs behind
// requireUser, so the caller is known. With neither configured it refuses
// everyone: an open admin endpoint is never the default.
func (a *api) requireAdmin(r *http.Request) error {
	if c := callerFrom(r.Context()); !c.admin && !slices.Contains(a.Admins, c.user) {
		return fmt.Errorf("user %d: %w", c.user, errForbidden)
	}
	return nil
}

// requireJSON refuses a write whose body is not declared JSON. Browsers send
// text/plain, form and multipart bodies cross-site without a preflight (a
// no-cors fetch), so any page a user visits could otherwise post here from
// their browser, reaching a service on their loopback or intranet; JSON
// needs a preflight, which this service never grants. A bodiless POST, such
// as the original front end's claim (axios sends Content-Length: 0), has
// nothing to misread and passes.
func (a *api) requireJSON(r *http.Request) error {
	// ContentLength is -1 for a body of unknown length (chunked), which
	// is a body too.
	if r.ContentLength != 0 && r.Method != http.MethodGet && r.Method != http.MethodHead {
		return checkJSONType(r)
	}
	return nil
}

// checkJSONType accepts application/json, with parameters such as charset,
// and the structured +json types, which no browser sends without a preflight.
func checkJSONType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return &answer{status: http.StatusUnsupportedMediaType, code: codeUnsupportedMediaType,
			msg: fmt.Sprintf("Content-Type must be application/json, got %q", ct)}
	}
	return nil
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
