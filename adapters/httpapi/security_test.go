package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/domain"
)

// TestVoucherCreationIsForAdminsOnly: only a listed admin's token creates a
// voucher; every refusal says why and changes nothing.
func TestVoucherCreationIsForAdminsOnly(t *testing.T) {
	body := validVoucher(nil)
	cases := []struct {
		name   string
		opt    options
		token  func(e *env) string
		status int
		code   string
	}{
		{"no_token", options{}, func(*env) string { return "" }, 401, "unauthorized"},
		{"unknown_token", options{}, func(*env) string { return "not-a-session" }, 401, "unauthorized"},
		{"another_user", options{}, func(e *env) string { return e.token(42) }, 403, "forbidden"},
		{"admin_of_another_list", options{admins: []domain.UserID{7}}, func(e *env) string { return e.adminToken() }, 403, "forbidden"},
		{"no_admin_configured", options{noAdmins: true}, func(e *env) string { return e.adminToken() }, 403, "forbidden"},
		{"listed_admin", options{}, func(e *env) string { return e.adminToken() }, 200, ""},
		{"second_listed_admin", options{admins: []domain.UserID{3, adminUser}}, func(e *env) string { return e.adminToken() }, 200, ""},
		{"bearer_admin_role", options{bearer: fakeIdP}, bearer("jwt-admin"), 200, ""},
		{"bearer_admin_role_no_admin_users", options{bearer: fakeIdP, noAdmins: true}, bearer("jwt-admin"), 200, ""},
		{"bearer_listed_admin", options{bearer: fakeIdP}, bearer("jwt-listed"), 200, ""},
		{"bearer_scheme_any_case", options{bearer: fakeIdP}, func(*env) string { return "bEARER jwt-admin" }, 200, ""},
		{"bearer_without_role", options{bearer: fakeIdP}, bearer("jwt-user"), 403, "forbidden"},
		{"bearer_unknown", options{bearer: fakeIdP}, bearer("forged"), 401, "unauthorized"},
		{"bearer_not_configured", options{}, bearer("jwt-admin"), 401, "unauthorized"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opt)
			res := e.do(req{method: "POST", path: "/voucher/seckill", token: tc.token(e), body: body})
			if tc.status == 200 {
				if !res.Success {
					t.Fatalf("admin refused: %d %s", res.status, res.raw)
				}
				if vs := e.list("1"); len(vs) != 1 {
					t.Fatalf("shop 1 has %d vouchers, want 1", len(vs))
				}
				return
			}
			wantRefusal(t, res, tc.status, tc.code, "")
			if got := e.calls.snapshot(); len(got) != 0 {
				t.Fatalf("a refused creation reached the ports: %v", got)
			}
		})
	}
}

func bearer(token string) func(*env) string {
	return func(*env) string { return "Bearer " + token }
}

// TestBearerTokensClaimBesideHmdpTokens: with an identity provider, its
// tokens claim and read their orders, hmdp's tokens still do, and neither
// kind is looked up where the other lives.
func TestBearerTokensClaimBesideHmdpTokens(t *testing.T) {
	e := newEnv(t, options{bearer: fakeIdP})
	voucher := e.addVoucher(1, 10)
	before := e.lookups.Load()
	order := e.mustOK(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: "Bearer jwt-user"}).dataString(t)
	if got := e.lookups.Load(); got != before {
		t.Fatalf("a bearer token made %d hmdp session lookups", got-before)
	}
	e.mustOK(req{method: "GET", path: "/voucher-order/" + order, token: "Bearer jwt-user"})
	wantRefusal(t, e.do(req{method: "GET", path: "/voucher-order/" + order, token: "Bearer jwt-admin"}), 404, "not_found", "")
	e.mustOK(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: e.token(42)})
	wantRefusal(t, e.do(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: "Bearer " + e.token(43)}),
		401, "unauthorized", "")
}

// TestAdminEndpointsLeaveTheRestOpen: listing needs no token, and claims and
// order status take any user's, as in the original.
func TestAdminEndpointsLeaveTheRestOpen(t *testing.T) {
	e := newEnv(t, options{noAdmins: true})
	saved, err := e.stored.AddSeckill(t.Context(), mustVoucher(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.gate.Preheat(t.Context(), saved); err != nil {
		t.Fatal(err)
	}
	if vs := e.list("1"); len(vs) != 1 {
		t.Fatalf("list: %+v", vs)
	}
	token := e.token(5)
	order := e.claim(e.list("1")[0].ID, token)
	if !order.Success {
		t.Fatalf("claim with no admin configured: %s", order.raw)
	}
	e.mustOK(req{method: "GET", path: "/voucher-order/" + order.dataString(t), token: token})
}

// mustVoucher is a seckill voucher of shop 1 on sale now, for a test that
// stores it directly (with no admin to create it over HTTP).
func mustVoucher(t *testing.T) domain.Voucher {
	t.Helper()
	sale, err := domain.NewSale(5, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "t"}, sale)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWritesTakeJSONOnly: a body a browser could send cross-site without a
// preflight (no type, text/plain, a form) is refused with 415 before any
// use case; a bodiless POST, as the original front end's claim, passes.
func TestWritesTakeJSONOnly(t *testing.T) {
	e := newEnv(t, options{})
	voucher := e.addVoucher(1, 5)
	admin := e.adminToken()
	user := e.token(8)
	for _, tc := range []struct {
		name, path, token, contentType string
	}{
		{"create_without_type", "/voucher/seckill", admin, ""},
		{"create_as_text", "/voucher/seckill", admin, "text/plain;charset=UTF-8"},
		{"create_as_form", "/voucher/seckill", admin, "application/x-www-form-urlencoded"},
		{"create_as_multipart", "/voucher/seckill", admin, "multipart/form-data; boundary=x"},
		{"create_unparsable_type", "/voucher/seckill", admin, "application/json; charset"},
		{"claim_with_a_text_body", "/voucher-order/seckill/" + voucher, user, "text/plain"},
		{"token_without_type", "/dev/tokens", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.calls.snapshot()
			res := e.do(req{method: "POST", path: tc.path, token: tc.token, body: validVoucher(nil),
				header: map[string]string{"Content-Type": tc.contentType}})
			wantRefusal(t, res, http.StatusUnsupportedMediaType, "unsupported_media_type", "")
			if !strings.Contains(res.ErrorMsg, "application/json") {
				t.Fatalf("errorMsg %q does not say what to send", res.ErrorMsg)
			}
			if after := e.calls.snapshot(); !equalCounts(before, after) {
				t.Fatalf("refused write reached the ports: %v -> %v", before, after)
			}
		})
	}
	if vs := e.list("1"); len(vs) != 1 || *vs[0].Stock != 5 {
		t.Fatalf("shop 1 changed: %+v", vs)
	}

	// The original front end (axios.post(url), no data) posts the claim with
	// Content-Length: 0 and no Content-Type; axios versions whose post
	// default is a form type may send that type, still with no body. Over a
	// real connection, as a browser would.
	srv := httptest.NewServer(contractHandler(t, e.h))
	defer srv.Close()
	for i, contentType := range []string{"", "application/x-www-form-urlencoded"} {
		r, _ := http.NewRequest("POST", srv.URL+"/voucher-order/seckill/"+voucher, nil)
		r.Header.Set("authorization", e.token(int64(100+i)))
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if res := decodeResult(t, resp.StatusCode, resp.Header.Get("Content-Type"), string(raw)); !res.Success {
			t.Fatalf("bodiless claim with Content-Type %q refused: %d %s", contentType, res.status, res.raw)
		}
	}
}

// TestRateLimitPerUser: one token hammering claims is answered 429 with no
// port call, while 100 other users on the same sale all get their order.
func TestRateLimitPerUser(t *testing.T) {
	const perUser = 5
	e := newEnv(t, options{queueCap: 256, limits: httpapi.Limits{PerUser: perUser, PerIP: 1000, Window: time.Minute}})
	voucher := e.addVoucher(1, 200)
	bot := e.token(1)

	var limited int
	for i := 0; i < 50; i++ {
		before := e.calls.snapshot()
		res := e.claim(voucher, bot)
		if i < perUser {
			if res.status == http.StatusTooManyRequests {
				t.Fatalf("request %d limited under the limit of %d", i+1, perUser)
			}
			continue
		}
		wantRefusal(t, res, http.StatusTooManyRequests, "rate_limited", "")
		if res.retryAfter != "60" {
			t.Fatalf("Retry-After = %q, want the window (60)", res.retryAfter)
		}
		if after := e.calls.snapshot(); !equalCounts(before, after) {
			t.Fatalf("a limited claim reached the ports: %v -> %v", before, after)
		}
		limited++
	}
	if limited != 50-perUser {
		t.Fatalf("%d claims limited, want %d", limited, 50-perUser)
	}
	// Order status shares the user's budget: polling is no way around it.
	wantRefusal(t, e.do(req{method: "GET", path: "/voucher-order/1", token: bot}), http.StatusTooManyRequests, "rate_limited", "")

	for u := int64(100); u < 200; u++ {
		if res := e.claim(voucher, e.token(u)); !res.Success {
			t.Fatalf("user %d refused while another user is limited: %d %s", u, res.status, res.raw)
		}
	}
	if got := e.gateStock(voucher); got != 200-101 {
		t.Fatalf("gate stock = %d, want %d", got, 200-101)
	}
}

// TestRateLimitPerIP: the per-IP limit answers before the session lookup,
// and one client's address does not limit another's.
func TestRateLimitPerIP(t *testing.T) {
	const perIP = 10
	e := newEnv(t, options{limits: httpapi.Limits{PerIP: perIP, Window: time.Minute}})
	voucher := e.addVoucher(1, 100)
	tokens := make([]string, 30)
	for i := range tokens {
		tokens[i] = e.token(int64(i + 1))
	}
	from := func(remote string, i int) result {
		return e.do(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: tokens[i], remote: remote})
	}
	for i := 0; i < perIP; i++ {
		if res := from("203.0.113.5:4000", i); !res.Success {
			t.Fatalf("claim %d under the limit: %s", i, res.raw)
		}
	}
	lookups := e.lookups.Load()
	for i := perIP; i < 20; i++ {
		wantRefusal(t, from("203.0.113.5:4001", i), http.StatusTooManyRequests, "rate_limited", "")
	}
	if n := e.lookups.Load() - lookups; n != 0 {
		t.Fatalf("IP-limited requests made %d session lookups, want 0", n)
	}
	for i := 20; i < 30; i++ {
		if res := from("198.51.100.9:4000", i); !res.Success {
			t.Fatalf("another client limited: %s", res.raw)
		}
	}
}

// TestClientIPComesFromTrustedProxiesOnly: X-Forwarded-For and X-Real-IP
// name the client only when the peer is a configured proxy; otherwise a bot
// rotating them still shares one per-IP budget.
func TestClientIPComesFromTrustedProxiesOnly(t *testing.T) {
	const perIP = 3
	proxy := netip.MustParsePrefix("10.0.0.0/8")
	type hop struct {
		remote string
		header map[string]string
	}
	cases := []struct {
		name    string
		proxies []netip.Prefix
		hop     func(i int) hop
		limited bool // whether the 10 requests share one budget
	}{
		{"spoofed_xff_from_untrusted_peer", nil, func(i int) hop {
			return hop{"203.0.113.5:1", map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i)}}
		}, true},
		{"spoofed_real_ip_from_untrusted_peer", nil, func(i int) hop {
			return hop{"203.0.113.5:1", map[string]string{"X-Real-IP": fmt.Sprintf("198.51.100.%d", i)}}
		}, true},
		{"untrusted_peer_with_proxies_configured", []netip.Prefix{proxy}, func(i int) hop {
			return hop{"203.0.113.5:1", map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i)}}
		}, true},
		// One IPv6 client owns its /64: rotating within it buys nothing.
		{"ipv6_addresses_of_one_64", nil, func(i int) hop {
			return hop{fmt.Sprintf("[2001:db8::%x]:1", i), nil}
		}, true},
		{"ipv6_addresses_of_distinct_64s", nil, func(i int) hop {
			return hop{fmt.Sprintf("[2001:db8:0:%x::1]:1", i), nil}
		}, false},
		{"distinct_clients_behind_a_trusted_proxy", []netip.Prefix{proxy}, func(i int) hop {
			return hop{"10.1.2.3:1", map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i)}}
		}, false},
		{"distinct_real_ips_behind_a_trusted_proxy", []netip.Prefix{proxy}, func(i int) hop {
			return hop{"10.1.2.3:1", map[string]string{"X-Real-IP": fmt.Sprintf("198.51.100.%d", i)}}
		}, false},
		{"one_client_behind_a_trusted_proxy", []netip.Prefix{proxy}, func(i int) hop {
			return hop{"10.1.2.3:1", map[string]string{"X-Forwarded-For": "198.51.100.7"}}
		}, true},
		// The proxy appends the address it saw; what the client wrote to the
		// left of it is its own invention and must not pick the bucket.
		{"client_prepended_xff_behind_a_trusted_proxy", []netip.Prefix{proxy}, func(i int) hop {
			return hop{"10.1.2.3:1", map[string]string{"X-Forwarded-For": fmt.Sprintf("192.0.2.%d, 198.51.100.7", i)}}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, options{proxies: tc.proxies, limits: httpapi.Limits{PerIP: perIP, Window: time.Minute}})
			token := e.token(1)
			var limited int
			for i := 1; i <= 10; i++ {
				h := tc.hop(i)
				res := e.do(req{method: "GET", path: "/voucher-order/1", token: token, remote: h.remote, header: h.header})
				if res.status == http.StatusTooManyRequests {
					limited++
				}
			}
			if want := map[bool]int{true: 10 - perIP, false: 0}[tc.limited]; limited != want {
				t.Fatalf("%d of 10 requests limited, want %d", limited, want)
			}
		})
	}
}

// TestHammeringBotDoesNotCrowdOutUsers is the start-gate race: one token
// fires 300 claims while 100 other users claim once each, all released at
// once. Every user gets an order; the bot gets its limit's worth of answers
// and 429s for the rest, none of which reach the gate.
func TestHammeringBotDoesNotCrowdOutUsers(t *testing.T) {
	const perUser, botClaims, users = 5, 300, 100
	e := newEnv(t, options{queueCap: 256, quiet: true, limits: httpapi.Limits{PerUser: perUser, PerIP: 10_000, Window: time.Minute}})
	voucher := e.addVoucher(1, 200)
	bot := e.token(1)
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = e.token(int64(1000 + i))
	}
	reserveBefore := e.calls.snapshot()["gate.Reserve"]

	start := make(chan struct{})
	var wg sync.WaitGroup
	botStatus := make(chan int, botClaims)
	userRes := make(chan result, users)
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		for i := 0; i < botClaims; i++ {
			botStatus <- e.claim(voucher, bot).status
		}
	}()
	for _, tok := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			userRes <- e.claim(voucher, tok)
		}()
	}
	close(start)
	wg.Wait()
	close(botStatus)
	close(userRes)

	for res := range userRes {
		if !res.Success {
			t.Fatalf("a user was refused during the bot's hammering: %d %s", res.status, res.raw)
		}
	}
	limited := 0
	for s := range botStatus {
		if s == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited != botClaims-perUser {
		t.Fatalf("bot: %d of %d claims limited, want %d", limited, botClaims, botClaims-perUser)
	}
	// At most: a claim path that answers the bot's repeats from a local mark
	// may reserve fewer.
	if got := e.calls.snapshot()["gate.Reserve"] - reserveBefore; got < users+1 || got > users+perUser {
		t.Fatalf("gate reservations: %d, want %d..%d (users + the bot's allowed claims)", got, users+1, users+perUser)
	}
	if got := e.gateStock(voucher); got != 200-users-1 {
		t.Fatalf("gate stock = %d, want %d", got, 200-users-1)
	}
}
