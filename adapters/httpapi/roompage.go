package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// roomAssets are the files GET /waiting-room/assets/{name} serves.
var roomAssets = map[string]string{
	"room.js":  "text/javascript; charset=utf-8",
	"room.css": "text/css; charset=utf-8",
}

// roomPage is a waiting user's page (web/room.html, ?voucher=<id>): public
// and static like the sale page, since a navigation cannot send the token;
// everything it shows comes from the join and poll endpoints.
func (a *api) roomPage(w http.ResponseWriter, r *http.Request) {
	a.serveAsset(w, "web/room.html", "text/html; charset=utf-8")
}

func (a *api) roomAsset(w http.ResponseWriter, r *http.Request) {
	ct, ok := roomAssets[chi.URLParam(r, "name")]
	if !ok {
		a.notFound(w, r)
		return
	}
	a.serveAsset(w, "web/"+chi.URLParam(r, "name"), ct)
}
