package httpapi

import (
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

// TestSlidingLimitWeighsThePreviousWindow: the previous window's requests
// count in proportion to how much of it is still within one window of now,
// so a client cannot spend its budget twice at a window's edge.
func TestSlidingLimitWeighsThePreviousWindow(t *testing.T) {
	const limit = 10
	l := newSlidingLimit(limit, time.Minute, hashUser)
	t0 := time.Unix(0, 0).Add(1000 * time.Minute) // a window's start
	for i := 0; i < limit; i++ {
		if !l.allow(7, t0.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("request %d refused under the limit", i+1)
		}
	}
	if l.allow(7, t0.Add(59*time.Second)) {
		t.Fatal("request over the limit allowed")
	}
	if !l.allow(8, t0.Add(59*time.Second)) {
		t.Fatal("another key refused")
	}
	// The next window's start: the previous one still counts whole.
	if l.allow(7, t0.Add(time.Minute)) {
		t.Fatal("allowed at the next window's start, with the previous window full")
	}
	// Halfway through it, half of the previous window counts: 5 more.
	half := t0.Add(90 * time.Second)
	for i := 0; i < 5; i++ {
		if !l.allow(7, half) {
			t.Fatalf("request %d halfway through the next window refused", i+1)
		}
	}
	if l.allow(7, half) {
		t.Fatal("sixth request halfway through the next window allowed")
	}
	// Two windows on, everything before is forgotten.
	for i := 0; i < limit; i++ {
		if !l.allow(7, t0.Add(3*time.Minute)) {
			t.Fatalf("request %d two windows later refused", i+1)
		}
	}
}

// TestSlidingLimitForgetsIdleKeys: a key is held while its requests can
// still count (its window and the next), then dropped, so the limiter's
// memory is bounded by the keys of the last two windows.
func TestSlidingLimitForgetsIdleKeys(t *testing.T) {
	l := newSlidingLimit(10, time.Minute, hashUser)
	// held lists the keys the shards hold, in either window.
	held := func() map[int64]bool {
		keys := map[int64]bool{}
		for i := range l.shards {
			for _, m := range []map[int64]int32{l.shards[i].curr, l.shards[i].prev} {
				for k := range m {
					keys[k] = true
				}
			}
		}
		return keys
	}
	t0 := time.Unix(0, 0).Add(1000 * time.Minute)
	for u := int64(1); u <= 100; u++ {
		l.allow(u, t0)
	}
	// The next window: the keys' first requests still count.
	for u := int64(1); u <= 100; u++ {
		if !l.allow(u, t0.Add(time.Minute)) {
			t.Fatalf("key %d refused with 2 of 10 requests", u)
		}
	}
	// The window after: half of the keys come back.
	for u := int64(1); u <= 50; u++ {
		l.allow(u, t0.Add(2*time.Minute+time.Second))
	}
	// A window on, a request in every shard makes each look at the window
	// (shards rotate lazily, on their next request): only the keys used
	// in the window before stay, 1..50, and the probes.
	probes := map[int64]bool{}
	seen := map[uint64]bool{}
	for k := int64(1000); len(seen) < limitShards; k++ {
		seen[l.hash(k)%limitShards] = true
		probes[k] = true
		l.allow(k, t0.Add(3*time.Minute))
	}
	keys := held()
	for k := range keys {
		if k > 50 && !probes[k] {
			t.Fatalf("key %d, idle for two windows, is still held", k)
		}
	}
	if len(keys) != 50+len(probes) {
		t.Fatalf("%d keys held, want %d", len(keys), 50+len(probes))
	}
}

func TestClientAddr(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cases := []struct {
		name, remote string
		header       map[string][]string
		want         string
	}{
		{"peer", "203.0.113.5:1", nil, "203.0.113.5"},
		{"untrusted_peer_ignores_xff", "203.0.113.5:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "203.0.113.5"},
		{"trusted_peer_xff", "10.1.1.1:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		{"skips_trusted_hops", "10.1.1.1:1", map[string][]string{"X-Forwarded-For": {"192.0.2.9, 198.51.100.1, 10.2.2.2"}}, "198.51.100.1"},
		{"later_header_line_is_nearer", "10.1.1.1:1", map[string][]string{"X-Forwarded-For": {"192.0.2.9", "198.51.100.1"}}, "198.51.100.1"},
		{"garbage_ends_the_walk", "10.1.1.1:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1, junk"}}, "10.1.1.1"},
		{"xff_wins_over_real_ip", "10.1.1.1:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}, "X-Real-Ip": {"198.51.100.2"}}, "198.51.100.1"},
		{"real_ip_when_xff_is_all_proxies", "10.1.1.1:1", map[string][]string{"X-Forwarded-For": {"10.3.3.3"}, "X-Real-Ip": {"198.51.100.2"}}, "198.51.100.2"},
		{"mapped_v4_folds", "[::ffff:10.1.1.1]:1", map[string][]string{"X-Forwarded-For": {"::ffff:198.51.100.1"}}, "198.51.100.1"},
		{"v6_peer", "[2001:db8::1]:1", nil, "2001:db8::1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			for k, v := range tc.header {
				r.Header[k] = v
			}
			got, ok := clientAddr(r, proxies)
			if !ok || got.String() != tc.want {
				t.Fatalf("clientAddr = %v, %v; want %s", got, ok, tc.want)
			}
		})
	}
}
