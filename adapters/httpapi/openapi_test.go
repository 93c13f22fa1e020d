package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/go-chi/chi/v5"

	"github.com/hmdp-go/seckill/adapters/httpapi"
)

// The contract: every request the handler tests make and every answer they
// get is checked against the OpenAPI document (env.do calls checkContract),
// so a field, status or code the code sends and the document does not name
// fails a test. kin-openapi validates OpenAPI 3.1 documents with a JSON
// Schema 2020-12 validator since v0.150; it is the library the issue names,
// and it works with net/http requests and recorders as they are.

type contract struct {
	doc    *openapi3.T
	router routers.Router
	errSch *openapi3.Schema
}

var loadContract = sync.OnceValues(func() (*contract, error) {
	// Non-JSON answers (the sale page and its assets) are checked for their
	// declared type only.
	for _, ct := range []string{"text/html", "text/javascript", "text/css", "text/csv"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.FileBodyDecoder)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(httpapi.OpenAPI)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, err
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &contract{doc: doc, router: router, errSch: doc.Components.Schemas["Error"].Value}, nil
})

func mustContract(t testing.TB) *contract {
	t.Helper()
	c, err := loadContract()
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return c
}

// tokenPresent is the document's "token" scheme as a validator can check it:
// the header is there. Whether the token is known is the server's to say.
func tokenPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.RequestValidationInput.Request.Header.Get("authorization") == "" {
		return errors.New("no authorization header")
	}
	return nil
}

// checkContract validates one exchange and fails the test on a mismatch.
func checkContract(t testing.TB, method, target string, header http.Header, body []byte, w *httptest.ResponseRecorder) {
	t.Helper()
	if err := contractError(mustContract(t), method, target, header, body, w.Code, w.Header(), w.Body.Bytes()); err != nil {
		t.Fatalf("contract: %v", err)
	}
}

// contractError validates one exchange. A request the document refuses must
// be refused by the server too (4xx); any answer must be one the document
// describes for the route and status. A request to a route the document does
// not name must get an error envelope.
func contractError(c *contract, method, target string, header http.Header, body []byte, status int, respHeader http.Header, respBody []byte) error {
	req, err := http.NewRequest(method, "http://seckill.test"+target, bytes.NewReader(body))
	if err != nil {
		// Targets the client library cannot even form are the fuzzers'
		// business; the router has seen them as raw paths.
		return nil
	}
	req.Header = header.Clone()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		if status < 400 {
			return fmt.Errorf("%s %s is not in openapi.json but answered %d", method, target, status)
		}
		var v any
		if err := json.Unmarshal(respBody, &v); err != nil {
			return fmt.Errorf("%s %s answered %d without an envelope: %s", method, target, status, respBody)
		}
		if err := c.errSch.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			return fmt.Errorf("%s %s answered %d with a body that is not an Error envelope: %v\n%s", method, target, status, err, respBody)
		}
		return nil
	}
	ctx := context.Background()
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: tokenPresent, IncludeResponseStatus: true, MultiError: true},
	}
	if reqErr := openapi3filter.ValidateRequest(ctx, in); reqErr != nil && (status < 400 || status >= 500) {
		return fmt.Errorf("openapi.json refuses %s %s (%v) but the server answered %d: %s", method, target, reqErr, status, respBody)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 respHeader,
		Body:                   io.NopCloser(bytes.NewReader(respBody)),
		Options:                in.Options,
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("the answer to %s %s does not match openapi.json: %v\nanswer %d: %s", method, target, err, status, respBody)
	}
	return nil
}

// contractHandler checks every exchange of a real server against the
// document: it copies what the handler reads and writes, passing both
// through unchanged. A mismatch is reported with Errorf, as the server's
// goroutine may not end the test.
func contractHandler(t testing.TB, h http.Handler) http.Handler {
	c := mustContract(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var read bytes.Buffer
		if r.Body != nil {
			r.Body = teeBody{io.TeeReader(r.Body, &read), r.Body}
		}
		target := r.URL.RequestURI()
		header := r.Header.Clone()
		tw := &teeWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(tw, r)
		if err := contractError(c, r.Method, target, header, read.Bytes(), tw.status, w.Header(), tw.body.Bytes()); err != nil {
			t.Errorf("contract: %v", err)
		}
	})
}

type teeBody struct {
	io.Reader
	io.Closer
}

type teeWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *teeWriter) WriteHeader(status int) { w.status = status; w.ResponseWriter.WriteHeader(status) }

func (w *teeWriter) Write(b []byte) (int, error) {
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestOpenAPIDocumentNamesExactlyTheRouterRoutes: a route added to the router
// without the document, or documented and never mounted, fails here.
func TestOpenAPIDocumentNamesExactlyTheRouterRoutes(t *testing.T) {
	c := mustContract(t)
	e := newEnv(t, options{})
	var mounted []string
	err := chi.Walk(e.h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		mounted = append(mounted, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(mounted)
	slices.Sort(documented)
	if !slices.Equal(mounted, documented) {
		t.Fatalf("router and openapi.json differ:\nrouter:   %s\ndocument: %s",
			strings.Join(mounted, ", "), strings.Join(documented, ", "))
	}
}

// TestOpenAPIServed: the document the service serves is the one the tests
// hold it to.
func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t, options{})
	w := e.raw(req{method: "GET", path: "/openapi.json"})
	if w.Code != http.StatusOK || !bytes.Equal(w.Body.Bytes(), httpapi.OpenAPI) {
		t.Fatalf("GET /openapi.json: %d, %d bytes; want the embedded document", w.Code, w.Body.Len())
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("served document: openapi %q, err %v", doc.OpenAPI, err)
	}
}

// TestContractCatchesADrift proves the check bites: an answer with a field
// the document does not name, and a status it does not list, fail it.
func TestContractCatchesADrift(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
	}{
		{"unknown_field", http.StatusOK, `{"success":true,"data":"ok","extra":1}`},
		{"undocumented_status", http.StatusTeapot, `{"success":false,"errorMsg":"x","code":"internal"}`},
		{"unknown_code", http.StatusServiceUnavailable, `{"success":false,"errorMsg":"x","code":"nope"}`},
		{"empty_error_message", http.StatusServiceUnavailable, `{"success":false,"errorMsg":"","code":"busy"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			w.WriteString(c.body)
			ft := &fatalRecorder{TB: t}
			func() {
				defer func() { _ = recover() }()
				checkContract(ft, "GET", "/readyz", http.Header{}, nil, w)
			}()
			if !ft.failed {
				t.Fatalf("the contract accepted %d %s", c.status, c.body)
			}
		})
	}
}

// fatalRecorder notes a Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(string, ...any) {
	f.failed = true
	panic("fatal")
}
