package httpapi_test

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/httpapi"
)

// TestPerIPLimitOnAProxyAddressSaysSoOnce: behind a reverse proxy that is not
// in SECKILL_TRUSTED_PROXIES every user shares the proxy's address and
// budget. When a loopback or private peer meets the per-IP limit and no proxy
// is trusted, one warning (however many refusals) names
// SECKILL_TRUSTED_PROXIES; a public peer, or a configured proxy, logs none.
func TestPerIPLimitOnAProxyAddressSaysSoOnce(t *testing.T) {
	const perIP = 3
	for _, tc := range []struct {
		name     string
		remote   string
		proxies  []netip.Prefix
		warnings int
	}{
		{name: "loopback_peer", remote: "127.0.0.1:5000", warnings: 1},
		{name: "private_peer", remote: "10.1.2.3:5000", warnings: 1},
		{name: "private_ipv6_peer", remote: "[fd00::7]:5000", warnings: 1},
		{name: "public_peer", remote: "203.0.113.5:5000", warnings: 0},
		{name: "proxy_configured", remote: "10.1.2.3:5000", proxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, warnings: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, options{quiet: true, proxies: tc.proxies, limits: httpapi.Limits{PerIP: perIP, Window: time.Minute}})
			voucher := e.addVoucher(1, 100)
			refused := 0
			for i := range 3 * perIP {
				res := e.do(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: e.token(int64(i + 1)), remote: tc.remote})
				if res.status == http.StatusTooManyRequests {
					refused++
				}
			}
			if refused != 2*perIP {
				t.Fatalf("%d requests refused, want %d", refused, 2*perIP)
			}
			lines := e.logLines("SECKILL_TRUSTED_PROXIES")
			if len(lines) != tc.warnings {
				t.Fatalf("%d warnings naming SECKILL_TRUSTED_PROXIES after %d refusals, want %d:\n%s", len(lines), refused, tc.warnings, e.logs.String())
			}
			if tc.warnings > 0 {
				peer := netip.MustParseAddrPort(tc.remote).Addr().String()
				if lines[0]["level"] != "warn" || lines[0]["peer"] != peer {
					t.Fatalf("warning %v: want level warn and peer %s", lines[0], peer)
				}
			}
		})
	}
}
