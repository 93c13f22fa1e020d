package httpapi

import (
	_ "embed"
	"net/http"
)

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
