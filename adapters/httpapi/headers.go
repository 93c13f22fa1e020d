package httpapi

import "net/http"

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
