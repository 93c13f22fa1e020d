package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestHeaderNamesAreCanonical: the names looked up in the header map
// directly are in net/http's canonical form, so a header sent in any case
// is found, as Header.Get would find it.
func TestHeaderNamesAreCanonical(t *testing.T) {
	for _, k := range []string{authorizationHeader, forwardedForHeader} {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Fatalf("%q is not canonical (%q)", k, c)
		}
	}
	r := httptest.NewRequest("POST", "/", nil)
	r.Header["Authorization"] = []string{"first", "second"}
	if got := firstHeader(r, authorizationHeader); got != r.Header.Get("authorization") || got != "first" {
		t.Fatalf("firstHeader = %q, Header.Get = %q", got, r.Header.Get("authorization"))
	}
	if got := firstHeader(r, forwardedForHeader); got != "" {
		t.Fatalf("an absent header reads %q", got)
	}
}
