package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"testing"
)

var han = regexp.MustCompile(`\p{Han}`)

// TestEveryAnswerSpeaksBothLanguages: every fixed answer's errorMsg is
// Chinese (the original front end shows it) with its English, or English
// already: the refusals, the error table's (the router's 404 and 405 among
// them) and the named ones.
func TestEveryAnswerSpeaksBothLanguages(t *testing.T) {
	answers := []answer{busyAnswer, internalAnswer, notReadyAnswer}
	for _, e := range errorTable {
		answers = append(answers, e.answer)
	}
	for _, a := range refusalAnswers {
		answers = append(answers, a)
	}
	for _, a := range answers {
		if han.MatchString(a.msg) == (a.msgEn == "") || han.MatchString(a.msgEn) {
			t.Errorf("answer %q %q: want Chinese with its English, or English alone", a.code, a.msg)
		}
		var env envelope
		if a.bodyEn != nil && (json.Unmarshal(a.bodyEn, &env) != nil || env.ErrorMsg != a.msgEn || env.Code != a.code) {
			t.Errorf("English body %s does not match the answer %q %q", a.bodyEn, a.code, a.msgEn)
		}
	}
}

func TestWantsEnglish(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{"", false},
		{"en", true},
		{"en-US,en;q=0.9", true},
		{"EN-gb", true},
		{"zh-CN,zh;q=0.9,en;q=0.8", false},
		{"zh-CN;q=0.5, en;q=0.8", true},
		{"fr, en;q=0.9", false},
		{"*", false},
		{"en;q=bogus", true},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set("Accept-Language", tc.header)
		}
		if got := wantsEnglish(r); got != tc.want {
			t.Errorf("Accept-Language %q: English %v, want %v", tc.header, got, tc.want)
		}
	}
}
