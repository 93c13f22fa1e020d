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

// slidingLimit is go-chi/httprate's sliding window (this window's count plus the last one's, weighted by its
// overlap with now), counted in locked shards keyed by a fixed-size value: an allowed request allocates nothing.
type slidingLimit[K comparable] struct {
	limit  int
	window int64 // ns
	hash   func(K) uint64
	shards [limitShards]limitShard[K]
}

const limitShards = 64

// limitShard counts the window from start (Unix ns) and the one before; older ones are forgotten.
type limitShard[K comparable] struct {
	mu         sync.Mutex
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

// allow counts a request of k at now unless k is over its limit.
func (l *slidingLimit[K]) allow(k K, now time.Time) bool {
	ns := now.UnixNano()
	start := ns - ns%l.window
	s := &l.shards[l.hash(k)%limitShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start != start {
		if s.start != start-l.window {
			clear(s.curr) // older than the previous window: forgotten too
		}
		clear(s.prev)
		s.curr, s.prev = s.prev, s.curr
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

// limitMiddleware refuses a key over lim; what skip says yes to is counted elsewhere.
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

func userLimitKey(r *http.Request) int64 { return int64(userFrom(r.Context())) }

func hashUser(u int64) uint64 { return mix64(uint64(u)) }

// ipLimitKey is the client's address as 16 bytes, an IPv6 one cut to its /64 (one client's, usually).
type ipLimitKey [16]byte

func hashIP(k ipLimitKey) uint64 {
	return mix64(binary.BigEndian.Uint64(k[:8]) ^ mix64(binary.BigEndian.Uint64(k[8:])))
}

func (a *api) ipKey(r *http.Request) ipLimitKey {
	ip, _ := clientAddr(r, a.TrustedProxies) // unmapped: an IPv4 client is Is4
	k := ipLimitKey(ip.As16())
	if ip.Is6() {
		clear(k[8:])
	}
	return k
}

// clientAddr is the peer, or the client a trusted proxy's X-Forwarded-For (fromXFF) or else last X-Real-IP names.
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

// fromXFF walks X-Forwarded-For from the right, so a client cannot choose its address by prepending: the
// first untrusted address is the client, and one that does not parse ends the walk with none.
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
		host = remoteAddr // a bare address
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
