package httpapi

import (
	"context"
	"embed"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/hmdp-go/seckill/domain"
)

var okBody = mustEncode(envelope{Success: true, Data: "ok"})

// healthz says the process serves HTTP; it checks no backend, so a Redis
// outage does not get every instance restarted at once.
func (a *api) healthz(w http.ResponseWriter, _ *http.Request) {
	writeBody(w, http.StatusOK, okBody)
}

// readyz says whether Redis and the database answer. Why not is logged, never
// sent: the probe is unauthenticated.
// The outcome is shared by the probes of Deps.PublicReadTTL.
func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	_, err := a.readiness.get(r.Context(), "", func(ctx context.Context) (struct{}, error) {
		ctx, cancel := context.WithTimeout(ctx, readyTimeout)
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

// mintToken is for development and load tests only: it logs in as any user
// without a password. NewRouter mounts it only when Deps.Tokens is set, which
// production configuration must not do.
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

// OpenAPI is the API's OpenAPI 3.1 description, served at GET /openapi.json.
// The handler tests validate every request they make and every answer they
// get against it, and check that it names exactly the router's routes, so
// it cannot drift from the code.
//
//go:embed openapi.json
var OpenAPI []byte

func (a *api) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "max-age=300")
	writeBody(w, http.StatusOK, OpenAPI)
}

// web holds the live sale page, the waiting room's page, and the chart
// library the sale page draws with (uPlot, MIT, vendored from its npm
// package's dist/): no front-end build step, and the pages work with no
// network but the service's own.
//
//go:embed web
var web embed.FS

// saleAssets are the files GET /admin/assets/{name} serves, roomAssets
// those of GET /waiting-room/assets/{name}, with their type; anything else
// is a 404, so the embedded tree is never listed.
var (
	saleAssets = map[string]string{
		"sales.js":          "text/javascript; charset=utf-8",
		"sales.css":         "text/css; charset=utf-8",
		"uPlot.iife.min.js": "text/javascript; charset=utf-8",
		"uPlot.min.css":     "text/css; charset=utf-8",
	}
	roomAssets = map[string]string{
		"room.js":  "text/javascript; charset=utf-8",
		"room.css": "text/css; charset=utf-8",
	}
)

// pageCSP lets a page run only its own scripts and talk only to this
// service. uPlot sizes its canvas through element styles, hence the inline
// style allowance; no inline script is allowed.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// page serves the embedded HTML page at path. The pages are static and
// public, as a browser's navigation cannot send the token header: the sale
// page's figures come from GET /admin/sales.json, which requires an admin's
// token; the waiting room's page (?voucher=<id>) shows only what the join
// and poll endpoints answer.
func page(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { serveAsset(w, path, "text/html; charset=utf-8") }
}

// assets serves the embedded files named in types under the route's {name}.
func (a *api) assets(types map[string]string) http.HandlerFunc {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		name := chi.URLParam(r, "name")
		ct, ok := types[name]
		if !ok {
			return errNoRoute
		}
		serveAsset(w, "web/"+name, ct)
		return nil
	})
}

func serveAsset(w http.ResponseWriter, path, contentType string) {
	b, err := web.ReadFile(path)
	if err != nil {
		// Only names listed above reach here, all embedded: a build error.
		panic("httpapi: embedded asset missing: " + path)
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// The assets change only with the binary; a short cache keeps a page
	// left open for hours from serving a stale script after an upgrade.
	h.Set("Cache-Control", "max-age=60")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
