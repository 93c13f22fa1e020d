package httpapi

import (
	"net/http/httptest"
	"regexp"
	"testing"
)

var han = regexp.MustCompile(`\p{Han}`)

// TestEveryAnswerSpeaksBothLanguages: every answer's errorMsg has a Chinese
// text (the original front end shows it) or is English already, and every
// Chinese one has its English: the refusals, the fixed answers and the
// router's own.
func TestEveryAnswerSpeaksBothLanguages(t *testing.T) {
	msgs := []string{"接口不存在", "不支持该请求方法"} // the router's 404 and 405
	for _, a := range fixedAnswers {
		msgs = append(msgs, a.msg)
	}
	for _, m := range refusalText {
		msgs = append(msgs, m)
	}
	if len(fixedAnswers) < 15 {
		t.Fatalf("%d fixed answers registered: the registry no longer sees them", len(fixedAnswers))
	}
	for _, m := range msgs {
		en := inEnglish(m)
		if m == "" || en == "" || han.MatchString(en) {
			t.Errorf("errorMsg %q has no English text (got %q)", m, en)
		}
	}
	for zh, en := range englishText {
		if !han.MatchString(zh) || han.MatchString(en) {
			t.Errorf("englishText maps %q to %q: want Chinese to English", zh, en)
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
