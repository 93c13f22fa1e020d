package httpapi

import (
	"context"
	"embed"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/sync/singleflight"

	"github.com/hmdp-go/seckill/domain"
)

var okBody = encoded(envelope{Success: true, Data: "ok"})

// healthz checks no backend: a Redis outage must not restart every instance.
func (a *api) healthz(w http.ResponseWriter, _ *http.Request) {
	writeBody(w, http.StatusOK, okBody)
}

// readyTimeout answers "not ready" within an orchestrator's probe timeout.
const readyTimeout = 2 * time.Second

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

// page serves a static public page (navigation cannot send the token).
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

// DefaultPublicReadTTL is how long the public reads that cost a backend round
// trip (the voucher list, /readyz) are reused: a flood costs one load per TTL.
const DefaultPublicReadTTL = time.Second

// maxCachedShops bounds the list cache against a client walking shop ids.
const maxCachedShops = 4096

// loadTimeout bounds a shared load, which no one client's disconnect cancels.
const loadTimeout = 5 * time.Second

// shortCache keeps a read's result for ttl if keep(err), loads a key once for
// concurrent requests (singleflight), and holds at most max keys.
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
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
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
		for k, old := range c.items {
			if !now.Before(old.until) {
				delete(c.items, k)
			}
		}
		if len(c.items) >= c.max {
			clear(c.items)
		}
	}
	c.items[key] = e
}

// forget drops key and makes a load under way store nothing: this instance
// reads its own writes.
func (c *shortCache[V]) forget(key string) {
	c.mu.Lock()
	c.gen++
	delete(c.items, key)
	c.mu.Unlock()
	c.group.Forget(key)
}
