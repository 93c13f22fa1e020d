// Package httpapi is the HTTP driving adapter: the hmdp-compatible JSON API
// (chi router, DTOs, middleware) in front of the application's use cases. It
// turns requests into use-case calls and errors into the original's Result
// envelope through one table, and refuses bad input before any use case runs.
package httpapi

import (
	"cmp"
	"context"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Deps is everything the router needs. AddVoucher, ListVouchers, Claim,
// GetOrder, Sessions and Ready are required; every other field's zero value
// is a default, or the closed or off setting, as its doc says (the zero Log
// discards).
type Deps struct {
	AddVoucher   *application.AddSeckillVoucher
	ListVouchers *application.ListShopVouchers
	Claim        *application.ClaimSeckill
	GetOrder     *application.GetOrder
	Sessions     ports.Sessions
	// Bearer, when set, resolves `Authorization: Bearer <token>` (an
	// identity provider's JWT) instead of Sessions; a token it names an
	// admin passes the admin endpoints as Admins do. Nil leaves such a
	// header to Sessions, which knows no such token.
	Bearer ports.BearerSessions
	// Tokens mints login tokens for anyone who asks; nil keeps POST
	// /dev/tokens unmounted, which is what production must run with.
	Tokens ports.TokenIssuer
	// Ready reports whether Redis and the database answer.
	Ready func(context.Context) error
	Log   zerolog.Logger
	// Location is the zone of the original's zone-less times
	// ("2026-11-29T20:00:00"), in requests and in answers; nil means UTC.
	Location *time.Location
	// MaxBodyBytes bounds request bodies; <= 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Clock is the time a new voucher's window is checked against (one
	// that has already ended is refused); nil means the wall clock.
	Clock ports.Clock
	// Admins may use the admin endpoints (voucher creation and every
	// operator endpoint to come); empty refuses them to everyone.
	Admins []domain.UserID
	// Limits rate-limits claims and order status; the zero value is off.
	Limits Limits
	// TrustedProxies are the reverse proxies whose X-Forwarded-For and
	// X-Real-IP headers name the client; empty trusts no header.
	TrustedProxies []netip.Prefix
	// Sales feeds the live sale page (GET /admin/sales); nil leaves the
	// page and its data unmounted.
	Sales *application.SaleDashboard
	// ClaimObserver, when set, is told the answer of every claim (metrics).
	ClaimObserver ClaimObserver
	// Split is the rule for a voucher whose request names no "buckets": one
	// with more stock than Split.Above is split into Split.Into buckets (at
	// most its stock). The zero value never splits.
	Split SplitRule
	// PublicReadTTL is how long the answers of GET /voucher/list/{shopId}
	// and GET /readyz are reused (0 means DefaultPublicReadTTL); a
	// negative value reuses nothing, only concurrent loads are shared.
	PublicReadTTL time.Duration
	// Cancel, when set, mounts POST /voucher-order/{id}/cancel.
	Cancel *application.CancelOrder
	// Pay and PaymentSecret, when both set, mount POST /payments/notify,
	// whose notifications must be signed with the secret (SignatureHeader).
	Pay           *application.PayOrder
	PaymentSecret []byte
	// Orders, when set, mounts a sale's order list and CSV export (GET
	// /admin/vouchers/{id}/orders and .../orders.csv); Audit, when set, the
	// audit trail of admin actions (GET /admin/audit). Both admin only.
	Orders *application.ListSaleOrders
	Audit  *application.ReadAuditLog
	// Controls, when set, mounts the sale controls (POST
	// /admin/vouchers/{id}/end, PUT .../end-time, POST .../stock, .../pause,
	// .../resume). Admin only.
	Controls *application.ControlSale
	// Rooms, when set, mounts the waiting rooms' join and poll (issue 27)
	// and makes a claim of a sale with a room need its pass (the claim's own
	// first step, ClaimSeckill.Claim); unset, a voucher cannot be created
	// with a room.
	Rooms *application.WaitingRoom
}

// SplitRule: see Deps.Split.
type SplitRule struct{ Above, Into int }

// DefaultMaxBodyBytes is far above any valid voucher (rules are at most 1024
// characters) and far below what would let a client make us buffer a lot.
const DefaultMaxBodyBytes = 64 << 10

// readyTimeout bounds a readiness probe so a stalled backend answers "not
// ready" within the orchestrator's probe timeout instead of hanging it.
const readyTimeout = 2 * time.Second

// api is Deps with NewRouter's defaults applied, plus what the router keeps.
type api struct {
	Deps
	// lists holds each shop's encoded voucher list, readiness the last
	// probe's outcome, for Deps.PublicReadTTL.
	lists     *shortCache[[]byte]
	readiness *shortCache[struct{}]
	// proxyWarned is when the unconfigured-proxy warning was last logged
	// (Unix ns; 0 = never).
	proxyWarned atomic.Int64
}

// NewRouter builds the HTTP handler. It panics on a missing required
// dependency so that a wiring mistake stops the process at start, not at the
// first request.
func NewRouter(d Deps) http.Handler {
	// Each field is checked on its own: a typed nil pointer stored in an `any`
	// is not == nil, so a generic map-of-any check would miss it.
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
	// A failed list is not kept (the next request tries again); a failed
	// probe is: an outage must not turn a probe flood into a ping flood.
	a.lists = newShortCache[[]byte](ttl, maxCachedShops, func(err error) bool { return err == nil })
	a.readiness = newShortCache[struct{}](ttl, 1, func(error) bool { return true })

	r := chi.NewRouter()
	// The request's scope (its context, the observer, the access log: see
	// scope) wraps the router, outside the recoverer so that a panic's 500
	// is logged like any other answer, with the panic as its error.
	r.Use(a.recoverer, a.guard(a.limitBody), a.guard(a.requireJSON))
	r.NotFound(a.refuse(errNoRoute))
	r.MethodNotAllowed(a.refuse(errMethodNotAllowed))

	r.Get("/healthz", a.healthz)
	r.Get("/readyz", a.readyz)
	r.Get("/openapi.json", a.openAPI)

	r.Get("/voucher/list/{shopId}", a.withID("shopId", a.listShopVouchers))

	// The one gate of every admin or operator endpoint: mount a new one in
	// this group. It needs the login token of a user listed in Deps.Admins
	// (or one the identity provider names an admin): 401 without a known
	// token, 403 for anyone else. The original leaves voucher creation open
	// to anyone; here it is an admin endpoint.
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

	// Claim and order status are what a bot hammers. The per-IP limit runs
	// before the session lookup and the per-user one right after it (a
	// cache hit for a repeated token), so a refused request costs no Redis.
	// The sold-out edge (edge.go) answers between the two and counts the
	// claims it looks at against this same per-IP limit: the group skips them.
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

	// A payment provider has no login token: the signature is its
	// credential. Without a secret the route does not exist.
	if a.Pay != nil && len(a.PaymentSecret) > 0 {
		r.Post("/payments/notify", a.handle(a.paymentNotify))
	}

	if a.Sales != nil {
		// The page and its assets are static and public (a browser's
		// navigation cannot send the token header); the figures
		// (/admin/sales.json, in the admin group) are not.
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

// routed is the router's entry (the scope, the edge) that still lists the
// routes behind it (chi.Walk), for whoever documents or checks them.
type routed struct {
	http.Handler
	routes
}

// routes is chi.Routes under a name that does not hide its Routes method.
type routes = chi.Routes
