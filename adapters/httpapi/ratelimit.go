package httpapi

import (
	"encoding/binary"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// slidingLimit is an in-process sliding-window rate limit: a key may make
// about limit requests per window, counted as the current fixed window's
// requests plus the previous window's weighted by how much of it still lies
// within one window of now (the algorithm of go-chi/httprate, which this
// replaces on the claim path). Counters live in shards, each under its own
// lock, keyed by a fixed-size value: an allowed request takes one short lock
// and allocates nothing, where httprate formatted the key, hashed it and
// serialised every request of every key on one mutex.
type slidingLimit[K comparable] struct {
	limit  int
	window int64 // ns
	hash   func(K) uint64
	shards [limitShards]limitShard[K]
}

// limitShards spreads the keys over enough locks that the claim path's
// goroutines rarely meet on one.
const limitShards = 64

type limitShard[K comparable] struct {
	mu sync.Mutex
	// start is the current window's start (Unix ns); curr counts its
	// requests, prev the window before it. Older windows are forgotten,
	// so a map holds only the keys seen in the last two windows.
	start      int64
	curr, prev map[K]int32
	_          [64]byte // keeps neighbouring shards' locks off one cache line
}

func newSlidingLimit[K comparable](limit int, window time.Duration, hash func(K) uint64) *slidingLimit[K] {
	l := &slidingLimit[K]{limit: limit, window: int64(window), hash: hash}
	for i := range l.shards {
		l.shards[i].curr, l.shards[i].prev = make(map[K]int32), make(map[K]int32)
	}
	return l
}

// allow counts one request of k at now, unless k is over its limit, in which
// case nothing is counted (a refused request does not lengthen the wait).
func (l *slidingLimit[K]) allow(k K, now time.Time) bool {
	ns := now.UnixNano()
	start := ns - ns%l.window
	s := &l.shards[l.hash(k)%limitShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.start {
	case start:
	case start - l.window:
		clear(s.prev)
		s.curr, s.prev = s.prev, s.curr
		s.start = start
	default:
		clear(s.prev)
		clear(s.curr)
		s.start = start
	}
	curr := s.curr[k]
	rate := float64(s.prev[k])*float64(l.window-(ns-start))/float64(l.window) + float64(curr)
	if int(math.Round(rate))+1 > l.limit {
		return false
	}
	s.curr[k] = curr + 1
	return true
}

// limitMiddleware refuses, through refuse and with Retry-After set to the
// window, a request whose key is over lim, before any backend is touched;
// an allowed request pays no headers. A request skip says yes to is not
// counted here (another place counts it).
func limitMiddleware[K comparable](lim *slidingLimit[K], key func(*http.Request) K, refuse http.HandlerFunc, skip func(*http.Request) bool) func(http.Handler) http.Handler {
	refusal := lim.refusal(refuse)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if (skip == nil || !skip(r)) && !lim.allow(key(r), time.Now()) {
				refusal(w, r)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// refusal is refuse with Retry-After set to the window.
func (l *slidingLimit[K]) refusal(refuse http.HandlerFunc) http.HandlerFunc {
	retryAfter := []string{strconv.FormatInt(int64(math.Ceil(time.Duration(l.window).Seconds())), 10)}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Retry-After"] = retryAfter
		refuse(w, r)
	}
}

func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x
}

// userLimitKey is the per-user limit's key.
func userLimitKey(r *http.Request) int64 { return int64(userFrom(r.Context())) }

func hashUser(u int64) uint64 { return mix64(uint64(u)) }

// ipLimitKey is the per-IP limit's key: the client's address as 16 bytes,
// an IPv4 one in its IPv4-mapped form, and an IPv6 one cut to its /64, which
// one client usually controls whole.
type ipLimitKey [16]byte

func hashIP(k ipLimitKey) uint64 {
	return mix64(binary.BigEndian.Uint64(k[:8]) ^ mix64(binary.BigEndian.Uint64(k[8:])))
}

// ipKey is the per-IP limit's key of r: see clientAddr. A peer address that
// does not parse (never from a real connection) is one bucket of its own.
func (a *api) ipKey(r *http.Request) ipLimitKey {
	ip, _ := clientAddr(r, a.TrustedProxies) // unmapped: an IPv4 client is Is4
	k := ipLimitKey(ip.As16())
	if ip.Is6() {
		clear(k[8:])
	}
	return k
}

// clientAddr is the client's address: the connection's peer, unless the
// peer is one of the trusted proxies, whose X-Forwarded-For (walked from the
// right, skipping trusted hops, so a client cannot choose its own address by
// prepending entries; an entry that does not parse ends the walk with no
// answer) names the client, or failing that the last X-Real-IP. It reads the
// headers in place: the request is not copied to carry the answer.
func clientAddr(r *http.Request, trusted []netip.Prefix) (netip.Addr, bool) {
	peer, ok := parseRemoteAddr(r.RemoteAddr)
	if !ok || len(trusted) == 0 || !inAnyPrefix(peer.WithZone(""), trusted) {
		return peer, ok
	}
	if ip, ok := fromXFF(r.Header[forwardedForHeader], trusted); ok {
		return ip, true
	}
	if v := r.Header.Values("X-Real-Ip"); len(v) > 0 {
		if ip, ok := parseHeaderAddr(v[len(v)-1]); ok {
			return ip, true
		}
	}
	return peer, true
}

// fromXFF walks X-Forwarded-For from the right: the first address that is
// not a trusted proxy is the client.
func fromXFF(headers []string, trusted []netip.Prefix) (netip.Addr, bool) {
	for _, h := range slices.Backward(headers) {
		for h != "" {
			j := strings.LastIndexByte(h, ',') // -1 for the last entry: v is h whole
			v := strings.TrimSpace(h[j+1:])
			h = h[:max(j, 0)]
			if v == "" {
				continue
			}
			ip, ok := parseHeaderAddr(v)
			if !ok {
				return netip.Addr{}, false
			}
			if !inAnyPrefix(ip, trusted) {
				return ip, true
			}
		}
	}
	return netip.Addr{}, false
}

func parseRemoteAddr(remoteAddr string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(remoteAddr); err == nil {
		return ap.Addr().Unmap(), true
	}
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr // a bare address, as some tests set
	}
	ip, err := netip.ParseAddr(host)
	return ip.Unmap(), err == nil
}

func parseHeaderAddr(s string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s)
	return ip.Unmap().WithZone(""), err == nil
}

func inAnyPrefix(ip netip.Addr, prefixes []netip.Prefix) bool {
	return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(ip) })
}
