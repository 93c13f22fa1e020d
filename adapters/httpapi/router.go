// Package httpapi is the HTTP driving adapter: the hmdp-compatible JSON API
// (chi router, DTOs, middleware) in front of the application's use cases. It
// turns requests into use-case calls and errors into the original's Result
// envelope through one table, and refuses bad input before any use case runs.
package httpapi

import (
	"cmp"
	"context"
	"embed"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"
	"golang.org/x/sync/singleflight"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Deps is everything the router needs. AddVoucher, ListVouchers, Claim,
// GetOrder, Sessions and Ready are required; a zero optional field is its
// default or off, and a nil optional use case leaves its routes unmounted.
type Deps struct {
	AddVoucher     *application.AddSeckillVoucher
	ListVouchers   *application.ListShopVouchers
	Claim          *application.ClaimSeckill
	GetOrder       *application.GetOrder
	Sessions       ports.Sessions
	Bearer         ports.BearerSessions        // `Authorization: Bearer <JWT>`; its admins pass as Admins do
	Tokens         ports.TokenIssuer           // mounts POST /dev/tokens, a token for anyone: never in production
	Ready          func(context.Context) error // Redis and the database answer
	Log            zerolog.Logger
	Location       *time.Location // of the original's zone-less times; nil is UTC
	MaxBodyBytes   int64          // <= 0: DefaultMaxBodyBytes
	Clock          ports.Clock    // a new voucher's window is checked against it
	Admins         []domain.UserID
	Limits         Limits         // on claims and order status
	TrustedProxies []netip.Prefix // whose X-Forwarded-For and X-Real-IP name the client
	Sales          *application.SaleDashboard
	ClaimObserver  ClaimObserver
	Split          SplitRule     // for a new voucher whose request names no "buckets"
	PublicReadTTL  time.Duration // 0 is DefaultPublicReadTTL; < 0 shares only concurrent loads
	Cancel         *application.CancelOrder
	Pay            *application.PayOrder // with PaymentSecret, mounts POST /payments/notify signed with it
	PaymentSecret  []byte
	Orders         *application.ListSaleOrders
	Audit          *application.ReadAuditLog
	Controls       *application.ControlSale
	Rooms          *application.WaitingRoom // mounts the rooms; a room sale's claim then needs its pass
}

// SplitRule splits a voucher of stock above Above into Into buckets (at most its stock).
type SplitRule struct{ Above, Into int }

// DefaultMaxBodyBytes is far above any valid voucher, far below a buffering risk.
const DefaultMaxBodyBytes = 64 << 10

// api is Deps with NewRouter's defaults applied, plus what the router keeps.
type api struct {
	Deps
	lists       *shortCache[[]byte] // each shop's encoded voucher list
	readiness   *shortCache[struct{}]
	proxyWarned atomic.Int64 // Unix ns of the last proxy warning; 0: never
}

// NewRouter builds the HTTP handler; it panics on a missing required dependency (a wiring mistake).
func NewRouter(d Deps) http.Handler {
	// In Deps's order, so the first missing one is named; one by one: a typed nil pointer in an `any` is not == nil.
	for _, dep := range []struct {
		name    string
		missing bool
	}{
		{"AddVoucher", d.AddVoucher == nil}, {"ListVouchers", d.ListVouchers == nil}, {"Claim", d.Claim == nil},
		{"GetOrder", d.GetOrder == nil}, {"Sessions", d.Sessions == nil}, {"Ready", d.Ready == nil},
	} {
		if dep.missing {
			panic("httpapi: Deps." + dep.name + " is nil")
		}
	}
	a := &api{Deps: d}
	a.Location = cmp.Or(a.Location, time.UTC)
	a.Clock = cmp.Or[ports.Clock](a.Clock, ports.SystemClock{})
	if a.MaxBodyBytes <= 0 {
		a.MaxBodyBytes = DefaultMaxBodyBytes
	}
	ttl := cmp.Or(d.PublicReadTTL, DefaultPublicReadTTL)
	// A failed probe is kept, a failed list not: an outage must not turn a probe flood into a ping flood.
	a.lists = newShortCache[[]byte](ttl, maxCachedShops, func(err error) bool { return err == nil })
	a.readiness = newShortCache[struct{}](ttl, 1, func(error) bool { return true })

	r := chi.NewRouter()
	// scope wraps the recoverer: a panic's 500 is logged like any answer.
	r.Use(a.recoverer, a.guard(a.limitBody), a.guard(a.requireJSON))
	r.NotFound(a.refuse(errNoRoute))
	r.MethodNotAllowed(a.refuse(errMethodNotAllowed))
	r.Get("/healthz", a.healthz)
	r.Get("/readyz", a.readyz)
	r.Get("/openapi.json", a.openAPI)
	r.Get("/voucher/list/{shopId}", a.withID("shopId", a.listShopVouchers))

	// Every admin endpoint (voucher creation too, open in the original): 401 without a token, 403 for a non-admin.
	r.Group(func(r chi.Router) {
		r.Use(a.guard(a.requireUser), a.guard(a.requireAdmin))
		r.Post("/voucher/seckill", a.handle(a.addSeckillVoucher))
		if a.Sales != nil {
			r.Get("/admin/sales.json", a.handle(a.salesBoard))
		}
		if a.Orders != nil {
			r.Get("/admin/vouchers/{id}/orders", a.withID("id", a.saleOrders))
			r.Get("/admin/vouchers/{id}/orders.csv", a.withID("id", a.exportSaleOrders))
		}
		if a.Audit != nil {
			r.Get("/admin/audit", a.handle(a.auditTrail))
		}
		if a.Controls != nil {
			r.Post("/admin/vouchers/{id}/end", a.withID("id", a.control(a.Controls.EndNow)))
			r.Put("/admin/vouchers/{id}/end-time", a.withID("id", a.moveSaleEnd))
			r.Post("/admin/vouchers/{id}/stock", a.withID("id", a.addSaleStock))
			r.Post("/admin/vouchers/{id}/pause", a.withID("id", a.control(a.Controls.Pause)))
			r.Post("/admin/vouchers/{id}/resume", a.withID("id", a.control(a.Controls.Resume)))
		}
	})

	// What a bot hammers: the per-IP limit runs before the session lookup, the per-user one after
	// it (a cache hit), so a refusal costs no Redis; the claims the edge counted are skipped here.
	var ipLimit *slidingLimit[ipLimitKey]
	if a.Limits.PerIP > 0 && a.Limits.Window > 0 {
		ipLimit = newSlidingLimit(a.Limits.PerIP, a.Limits.Window, hashIP)
	}
	var edgeCounted func(*http.Request) bool
	if a.Claim.MarksSoldOut() {
		edgeCounted = func(r *http.Request) bool { _, ok := edgeClaim(r); return ok }
	}
	r.Group(func(r chi.Router) {
		if ipLimit != nil {
			r.Use(limitMiddleware(ipLimit, a.ipKey, a.ipRateLimited, edgeCounted))
		}
		r.Use(a.guard(a.requireUser))
		if n := a.Limits.PerUser; n > 0 && a.Limits.Window > 0 {
			r.Use(limitMiddleware(newSlidingLimit(n, a.Limits.Window, hashUser), userLimitKey, a.refuse(errRateLimited), nil))
		}
		if a.Rooms != nil {
			r.Post("/voucher-order/room/{id}/join", a.withID("id", a.joinRoom))
			r.Get("/voucher-order/room/{id}", a.withID("id", a.pollRoom))
		}
		r.Post("/voucher-order/seckill/{id}", a.withID("id", a.claimSeckill))
		r.Get("/voucher-order/{id}", a.withID("id", a.orderStatus))
		if a.Cancel != nil {
			r.Post("/voucher-order/{id}/cancel", a.withID("id", a.cancelOrder))
		}
	})

	// A payment provider's credential is the signature, not a token.
	if a.Pay != nil && len(a.PaymentSecret) > 0 {
		r.Post("/payments/notify", a.handle(a.paymentNotify))
	}
	if a.Sales != nil {
		r.Get("/admin/sales", page("web/sales.html"))
		r.Get("/admin/assets/{name}", a.assets(saleAssets))
	}
	if a.Rooms != nil {
		r.Get("/waiting-room", page("web/room.html"))
		r.Get("/waiting-room/assets/{name}", a.assets(roomAssets))
	}
	if a.Tokens != nil {
		r.Post("/dev/tokens", a.handle(a.mintToken))
	}
	scoped := a.scope(r)
	if !a.Claim.MarksSoldOut() {
		return routed{scoped, r}
	}
	edge := &soldOutEdge{a: a, next: scoped, ip: ipLimit, soldOut: answerFor(domain.ErrSoldOut)}
	if ipLimit != nil {
		edge.refuse = a.scope(ipLimit.refusal(a.ipRateLimited))
	}
	return routed{edge, r}
}

// routed is the router's entry that still lists its routes (chi.Walk); the
// alias keeps chi.Routes's Routes method from being hidden by the field name.
type (
	routed struct {
		http.Handler
		routes
	}
	routes = chi.Routes
)

var okBody = encoded(envelope{Success: true, Data: "ok"})

// healthz checks no backend: a Redis outage must not restart every instance.
func (a *api) healthz(w http.ResponseWriter, _ *http.Request) { writeBody(w, http.StatusOK, okBody) }

// readyz says whether Redis and the database answer; why not is logged, never sent (no auth).
func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	_, err := a.readiness.get(r.Context(), "", func(ctx context.Context) (struct{}, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second) // within a probe's timeout
		defer cancel()
		return struct{}{}, a.Ready(ctx)
	})
	if err != nil {
		noteError(r, fmt.Errorf("not ready: %w", err))
		writeBody(w, notReadyAnswer.status, notReadyAnswer.body)
		return
	}
	writeBody(w, http.StatusOK, okBody)
}

// mintToken logs in as any user without a password: development only.
func (a *api) mintToken(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		UserID int64 `json:"userId"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.UserID <= 0 {
		return &domain.ValidationError{Field: "userId", Reason: "must be a positive id"}
	}
	token, err := a.Tokens.Mint(r.Context(), domain.UserID(req.UserID))
	if err != nil {
		return fmt.Errorf("mint token for user %d: %w", req.UserID, err)
	}
	writeOK(w, token)
	return nil
}

// OpenAPI is the API's OpenAPI 3.1 description, served at GET /openapi.json; tests hold the API to it.
//
//go:embed openapi.json
var OpenAPI []byte

func (a *api) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "max-age=300")
	writeBody(w, http.StatusOK, OpenAPI)
}

// web holds the sale and waiting room pages and uPlot (MIT, vendored from its npm dist/): no build step.
//
//go:embed web
var web embed.FS

// The files each assets route serves (anything else is a 404), and their types.
var (
	saleAssets = []string{"sales.js", "sales.css", "uPlot.iife.min.js", "uPlot.min.css"}
	roomAssets = []string{"room.js", "room.css"}
	assetTypes = map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
)

// pageCSP allows only the service's own scripts and connections (uPlot needs inline styles).
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// page serves a static public page (navigation cannot send the token).
func page(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { serveAsset(w, path, "text/html; charset=utf-8") }
}

func (a *api) assets(names []string) http.HandlerFunc {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		name := chi.URLParam(r, "name")
		if !slices.Contains(names, name) {
			return errNoRoute
		}
		serveAsset(w, "web/"+name, assetTypes[path.Ext(name)])
		return nil
	})
}

func serveAsset(w http.ResponseWriter, path, contentType string) {
	b, err := web.ReadFile(path)
	if err != nil { // only listed names reach here
		panic("httpapi: embedded asset missing: " + path)
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// Short: a page left open must not keep a stale script after an upgrade.
	h.Set("Cache-Control", "max-age=60")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// DefaultPublicReadTTL is how long the voucher list and /readyz are reused: a flood costs one load per TTL.
const DefaultPublicReadTTL = time.Second

const maxCachedShops = 4096 // against a client walking shop ids

// shortCache keeps a read for ttl if keep(err), loads a key once for concurrent requests, holds <= max keys.
type shortCache[V any] struct {
	ttl   time.Duration
	max   int
	keep  func(error) bool
	group singleflight.Group

	mu    sync.Mutex
	gen   uint64 // bumped by forget: a load begun before it stores nothing
	items map[string]cachedRead[V]
}

type cachedRead[V any] struct {
	v     V
	err   error
	until time.Time
}

func newShortCache[V any](ttl time.Duration, max int, keep func(error) bool) *shortCache[V] {
	return &shortCache[V]{ttl: ttl, max: max, keep: keep, items: make(map[string]cachedRead[V])}
}

func (c *shortCache[V]) get(ctx context.Context, key string, load func(context.Context) (V, error)) (V, error) {
	c.mu.Lock()
	e, ok := c.items[key]
	c.mu.Unlock()
	if ok && time.Now().Before(e.until) {
		return e.v, e.err
	}
	r, _, _ := c.group.Do(key, func() (any, error) {
		c.mu.Lock()
		gen := c.gen
		e, ok := c.items[key]
		c.mu.Unlock()
		// A miss just before the last flight stored takes what it stored.
		if ok && time.Now().Before(e.until) {
			return e, nil
		}
		// Shared: no one client's disconnect cancels it, a timeout does.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		v, err := load(lctx)
		e = cachedRead[V]{v: v, err: err, until: time.Now().Add(c.ttl)}
		if c.ttl > 0 && c.keep(err) {
			c.store(key, e, gen)
		}
		return e, nil
	})
	e = r.(cachedRead[V])
	return e.v, e.err
}

func (c *shortCache[V]) store(key string, e cachedRead[V], gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if _, ok := c.items[key]; !ok && len(c.items) >= c.max {
		now := time.Now()
		maps.DeleteFunc(c.items, func(_ string, old cachedRead[V]) bool { return !now.Before(old.until) })
		if len(c.items) >= c.max {
			clear(c.items)
		}
	}
	c.items[key] = e
}

// forget drops key and makes a load under way store nothing: this instance reads its own writes.
func (c *shortCache[V]) forget(key string) {
	c.mu.Lock()
	c.gen++
	delete(c.items, key)
	c.mu.Unlock()
	c.group.Forget(key)
}
