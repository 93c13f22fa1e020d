package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestDateHeaderIsEachAnswersSecond: the cached Date is the answer's own
// second as net/http formats it, also when the seconds of concurrent
// answers interleave (an answer whose second is older than the one stored
// gets its own, not the newer one), and a second already formatted costs
// no allocation.
func TestDateHeaderIsEachAnswersSecond(t *testing.T) {
	base := time.Date(2026, 12, 3, 6, 59, 58, 900_000_000, time.FixedZone("CST", 8*3600))
	for _, step := range []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond, -time.Second, 2 * time.Second, time.Hour} {
		now := base.Add(step)
		got := dateHeader(now)
		if want := now.UTC().Format(http.TimeFormat); len(got) != 1 || got[0] != want {
			t.Fatalf("Date at %v = %q, want %q", now, got, want)
		}
	}
	now := base.Add(3 * time.Second)
	dateHeader(now)
	if n := testing.AllocsPerRun(100, func() { dateHeader(now) }); n != 0 {
		t.Fatalf("a Date of a second already formatted allocated %.0f times", n)
	}
}

// TestAnswersCarryOneDate: net/http keeps the answer's Date and adds none
// of its own.
func TestAnswersCarryOneDate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeBody(w, http.StatusOK, []byte(`{}`))
	}))
	defer srv.Close()
	before := time.Now().Truncate(time.Second)
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	after := time.Now()
	dates := res.Header.Values("Date")
	if len(dates) != 1 {
		t.Fatalf("Date headers %q, want one", dates)
	}
	at, err := http.ParseTime(dates[0])
	if err != nil || at.Before(before) || at.After(after) {
		t.Fatalf("Date %q (%v, %v) is not the answer's second (between %v and %v)", dates[0], at, err, before, after)
	}
}
