package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
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

// requestID is the request's id: the client's X-Request-Id when it is
// usable (clientRequestID), else one made here.
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
	status      int
	wroteHeader bool
	err         error

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
	if !rec.wroteHeader {
		rec.status, rec.wroteHeader = status, true
	}
	rec.ResponseWriter.WriteHeader(status)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if !rec.wroteHeader {
		rec.status, rec.wroteHeader = http.StatusOK, true
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
		rec := &recorder{ResponseWriter: w, status: http.StatusOK, seq: requestIDs.seq.Add(1), arrived: start,
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
		a.accessLog(r, requestID, rec.status, rec.err, took)
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
			if rec := recorderOf(r.Context()); rec.wroteHeader {
				// Too late for an envelope; the client gets a truncated answer.
				rec.err = err
				return
			}
			a.fail(w, r, err)
		}()
		next.ServeHTTP(w, r)
	})
}

// limitBody refuses a body larger than maxBody: at once when its declared
// length says so, on reading otherwise (the decoder then reports 413).
func (a *api) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > a.MaxBodyBytes {
			a.fail(w, r, errBodyTooLarge(a.MaxBodyBytes))
			return
		}
		// The claim path has no body: skip the wrapper and its allocation.
		if r.Body != nil && r.Body != http.NoBody {
			// The server's own writer, not the recorder, lets MaxBytesReader
			// tell the server to close the connection after the answer.
			r.Body = http.MaxBytesReader(recorderOf(r.Context()).ResponseWriter, r.Body, a.MaxBodyBytes)
		}
		next.ServeHTTP(w, r)
	})
}

func errBodyTooLarge(max int64) error {
	return &requestError{
		status: http.StatusRequestEntityTooLarge,
		code:   codeBadRequest,
		msg:    fmt.Sprintf("request body is larger than %d bytes", max),
	}
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
func (a *api) requireUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := firstHeader(r, authorizationHeader)
		if token == "" {
			a.fail(w, r, errNoToken)
			return
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
				err = fmt.Errorf("resolve session token: %w: %w", application.ErrBusy, err)
			}
			a.fail(w, r, err)
			return
		}
		if c.user <= 0 {
			// A corrupt session must not become a 400 further down.
			a.fail(w, r, fmt.Errorf("session token resolved to invalid user %d", c.user))
			return
		}
		recorderOf(r.Context()).caller = c
		next.ServeHTTP(w, r)
	})
}

// callerFrom is only called behind requireUser, which guarantees a user.
func callerFrom(ctx context.Context) caller { return recorderOf(ctx).caller }

func userFrom(ctx context.Context) domain.UserID { return callerFrom(ctx).user }

// The router's own refusals, answered through errorTable.
var (
	errNoRoute          = errors.New("no such route")
	errMethodNotAllowed = errors.New("method not allowed")
)

func (a *api) notFound(w http.ResponseWriter, r *http.Request) {
	a.fail(w, r, errNoRoute)
}

func (a *api) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	a.fail(w, r, errMethodNotAllowed)
}
