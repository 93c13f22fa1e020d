package httpapi

import (
	"net/http"
	"strconv"
	"strings"
)

// The original front end shows errorMsg verbatim, in Chinese; a client that
// asks for English (Accept-Language whose preferred language is en) gets the
// same answer with an English errorMsg (answer.msgEn, beside its Chinese in
// envelope.go). Codes never change.

// wantsEnglish: the language the client prefers most (by q, the first on a
// tie) is English. Read on error paths and the sold-out answer only.
func wantsEnglish(r *http.Request) bool {
	v := r.Header["Accept-Language"]
	if len(v) == 0 {
		return false
	}
	best, bestQ := "", -1.0
	for _, part := range strings.Split(v[0], ",") {
		tag, params, _ := strings.Cut(part, ";")
		q := 1.0
		if p := strings.TrimSpace(params); strings.HasPrefix(p, "q=") {
			if f, err := strconv.ParseFloat(p[2:], 64); err == nil {
				q = f
			}
		}
		if q > bestQ {
			best, bestQ = strings.TrimSpace(tag), q
		}
	}
	primary, _, _ := strings.Cut(strings.ToLower(best), "-")
	return primary == "en"
}
