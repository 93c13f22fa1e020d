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

// healthz checks no backend, so a Redis outage does not get every instance
// restarted at once.
func (a *api) healthz(w http.ResponseWriter, _ *http.Request) {
	writeBody(w, http.StatusOK, okBody)
}

// readyz says whether Redis and the database answer; why not is logged, never
// sent (the probe is unauthenticated).
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

// mintToken logs in as any user without a password: development and load
// tests only (Deps.Tokens).
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

// OpenAPI is the API's OpenAPI 3.1 description, served at GET /openapi.json;
// the tests hold every request, answer and route to it.
//
//go:embed openapi.json
var OpenAPI []byte

func (a *api) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "max-age=300")
	writeBody(w, http.StatusOK, OpenAPI)
}

// web holds the sale and waiting room pages and uPlot (MIT, vendored from its
// npm dist/): no front-end build, and no network but the service's own.
//
//go:embed web
var web embed.FS

// The files each assets route serves, with their type; anything else is a 404.
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

// pageCSP allows only the service's own scripts and connections; uPlot sizes
// its canvas through element styles, hence the inline style.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// page serves an embedded HTML page, static and public (a browser's
// navigation cannot send the token): its figures come from authorised reads.
func page(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { serveAsset(w, path, "text/html; charset=utf-8") }
}

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
