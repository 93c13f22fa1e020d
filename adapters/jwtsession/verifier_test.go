package jwtsession_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hmdp-go/seckill/adapters/jwtsession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

func newIdP(t *testing.T) *testenv.IdP {
	p := testenv.NewIdP()
	t.Cleanup(p.Close)
	return p
}

func newVerifier(t *testing.T, o jwtsession.Options) *jwtsession.Verifier {
	t.Helper()
	v, err := jwtsession.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

func optionsFor(p *testenv.IdP, clock ports.Clock) jwtsession.Options {
	return jwtsession.Options{JWKSURL: p.JWKSURL(), Issuer: p.Issuer, Audience: p.Audience, AdminRole: "seckill-admin", Clock: clock}
}

func wantSession(t *testing.T, v *jwtsession.Verifier, token string, user domain.UserID, admin bool) {
	t.Helper()
	u, a, err := v.Session(context.Background(), token)
	if err != nil || u != user || a != admin {
		t.Fatalf("Session = %d, admin %v, %v; want %d, admin %v", u, a, err, user, admin)
	}
}

func wantRefused(t *testing.T, v *jwtsession.Verifier, token string) {
	t.Helper()
	if u, _, err := v.Session(context.Background(), token); !errors.Is(err, ports.ErrUnknownToken) {
		t.Fatalf("Session = %d, %v; want ErrUnknownToken", u, err)
	}
}

func TestSessionReadsTheUserAndTheAdminRole(t *testing.T) {
	p := newIdP(t)
	p.AddKey("ec", "ES256")
	now := testenv.Now()
	v := newVerifier(t, optionsFor(p, testenv.NewClock(now)))

	wantSession(t, v, p.Token(42, now), 42, false)
	wantSession(t, v, p.Token(43, now, "reader", "seckill-admin"), 43, true)
	wantSession(t, v, p.Sign("ec", p.Claims(44, now, "reader")), 44, false)
	c := p.Claims(45, now)
	c["roles"] = "seckill-admin" // one role as a plain string
	wantSession(t, v, p.Sign("ec", c), 45, true)

	o := optionsFor(p, testenv.NewClock(now))
	o.UserClaim, o.RolesClaim = "uid", "groups"
	named := newVerifier(t, o)
	c = p.Claims(0, now)
	c["sub"], c["uid"], c["groups"] = "someone@shop.test", 46, []string{"seckill-admin"} // a JSON number
	wantSession(t, named, p.Sign(testenv.IdPKey, c), 46, true)
}

// TestSessionRefusesEveryAttack: each token fails one check, and is refused.
func TestSessionRefusesEveryAttack(t *testing.T) {
	p := newIdP(t)
	now := testenv.Now()
	forger := testenv.NewIdP() // keys of its own, never published by p
	forger.Close()
	forger.AddKey("k-unknown", "RS256")
	pub, err := x509.MarshalPKIXPublicKey(p.PublicKey(testenv.IdPKey))
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	sign := func(edit func(jwt.MapClaims)) string {
		c := p.Claims(42, now)
		edit(c)
		return p.Sign(testenv.IdPKey, c)
	}
	header := func(method jwt.SigningMethod, key any, kid string) string {
		tok := jwt.NewWithClaims(method, p.Claims(42, now))
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := map[string]string{
		"forged_signature": forger.Sign(testenv.IdPKey, p.Claims(42, now)), // same kid, another key
		"tampered_claims": func() string {
			parts := strings.Split(p.Token(42, now), ".")
			other := strings.Split(p.Token(1, now, "seckill-admin"), ".")
			return parts[0] + "." + other[1] + "." + parts[2]
		}(),
		"expired":          sign(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }),
		"no_expiry":        sign(func(c jwt.MapClaims) { delete(c, "exp") }),
		"not_yet_valid":    sign(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() }),
		"wrong_audience":   sign(func(c jwt.MapClaims) { c["aud"] = "another-app" }),
		"wrong_issuer":     sign(func(c jwt.MapClaims) { c["iss"] = "https://evil.test" }),
		"alg_none":         header(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, testenv.IdPKey),
		"hs256_public_key": header(jwt.SigningMethodHS256, pubPEM, testenv.IdPKey),
		"hs256_key_der":    header(jwt.SigningMethodHS256, pub, testenv.IdPKey),
		"unknown_kid":      forger.Sign("k-unknown", p.Claims(42, now)),
		"missing_user":     sign(func(c jwt.MapClaims) { delete(c, "sub") }),
		"non_numeric_user": sign(func(c jwt.MapClaims) { c["sub"] = "alice" }),
		"zero_user":        sign(func(c jwt.MapClaims) { c["sub"] = "0" }),
		"negative_user":    sign(func(c jwt.MapClaims) { c["sub"] = "-7" }),
		"fractional_user":  sign(func(c jwt.MapClaims) { c["sub"] = 4.5 }),
		"not_a_jwt":        "hmdp-token-0123456789abcdef",
		"oversized":        strings.Repeat("a", 9<<10),
	}
	v := newVerifier(t, optionsFor(p, testenv.NewClock(now)))
	for name, token := range cases {
		t.Run(name, func(t *testing.T) { wantRefused(t, v, token) })
	}
}

// TestIssuerAndAudienceAreCheckedWhenSet: DESIGN.md's rule. Unset, a token
// of any issuer or audience the provider signed passes (the service warns at
// start); set, only the named one does.
func TestIssuerAndAudienceAreCheckedWhenSet(t *testing.T) {
	p := newIdP(t)
	now := testenv.Now()
	elsewhere := p.Claims(42, now)
	elsewhere["iss"], elsewhere["aud"] = "https://other-idp.test", "another-app"
	token := p.Sign(testenv.IdPKey, elsewhere)

	o := optionsFor(p, testenv.NewClock(now))
	o.Issuer, o.Audience = "", ""
	wantSession(t, newVerifier(t, o), token, 42, false)
	wantRefused(t, newVerifier(t, optionsFor(p, testenv.NewClock(now))), token)
}

// TestSessionKeepsTheLastKeysWhenTheJWKSStopsAnswering: tokens signed with a
// key fetched before still verify; a new key, which the set never delivered,
// is refused.
func TestSessionKeepsTheLastKeysWhenTheJWKSStopsAnswering(t *testing.T) {
	p := newIdP(t)
	now := testenv.Now()
	v := newVerifier(t, optionsFor(p, testenv.NewClock(now)))
	wantSession(t, v, p.Token(1, now), 1, false)

	p.SetDown(true)
	p.AddKey("k2", "RS256")
	wantSession(t, v, p.Token(2, now), 2, false) // not cached: verified with the kept key
	wantRefused(t, v, p.Sign("k2", p.Claims(3, now)))
}

// TestSessionFollowsAKeyRotation: a token naming a key published after the
// last fetch makes one fetch and verifies; a flood of unknown kids right
// after makes none and is refused at once.
func TestSessionFollowsAKeyRotation(t *testing.T) {
	p := newIdP(t)
	now := testenv.Now()
	v := newVerifier(t, optionsFor(p, testenv.NewClock(now)))
	wantSession(t, v, p.Token(1, now), 1, false)
	fetched := p.Fetches()

	p.AddKey("k2", "ES256")
	wantSession(t, v, p.Sign("k2", p.Claims(2, now, "seckill-admin")), 2, true)
	if got := p.Fetches(); got != fetched+1 {
		t.Fatalf("the new kid made %d fetches, want 1", got-fetched)
	}
	p.AddKey("k3", "RS256")
	began := time.Now()
	for i := range 50 {
		wantRefused(t, v, p.Sign("k3", p.Claims(domain.UserID(10+i), now)))
	}
	if got := p.Fetches(); got != fetched+1 {
		t.Fatalf("unknown kids within the refresh interval made %d more fetches, want none", got-fetched-1)
	}
	if took := time.Since(began); took > time.Second {
		t.Fatalf("refusing 50 unknown kids took %s: they waited for a fetch", took)
	}
	wantSession(t, v, p.Token(4, now), 4, false) // the rotation kept the old key
}

// TestSessionServesAVerifiedTokenUntilItsExpiry: a verified token is
// answered from memory, with no further check, until its exp and never
// after; past the leeway it is refused.
func TestSessionServesAVerifiedTokenUntilItsExpiry(t *testing.T) {
	p := newIdP(t)
	now := testenv.Now()
	clock := testenv.NewClock(now)
	v := newVerifier(t, optionsFor(p, clock))
	c := p.Claims(7, now)
	c["exp"] = now.Add(time.Minute).Unix()
	token := p.Sign(testenv.IdPKey, c)
	wantSession(t, v, token, 7, false)
	if !jwtsession.Holds(v, token) {
		t.Fatal("a verified token is not cached")
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _, _ = v.Session(context.Background(), token) }); allocs != 0 {
		t.Fatalf("a cached token costs %.0f allocations: it is verified again", allocs)
	}
	clock.Advance(time.Minute)
	if jwtsession.Holds(v, token) {
		t.Fatal("the cache serves a token at its exp")
	}
	clock.Advance(jwtsession.Leeway + time.Second)
	wantRefused(t, v, token)
}

func TestSessionReadsPublicKeysFromAFile(t *testing.T) {
	p := newIdP(t)
	p.AddKey("ec", "ES256")
	now := testenv.Now()
	var keys []byte
	for _, kid := range []string{testenv.IdPKey, "ec"} {
		der, err := x509.MarshalPKIXPublicKey(p.PublicKey(kid))
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	file := filepath.Join(t.TempDir(), "keys.pem")
	if err := os.WriteFile(file, keys, 0o600); err != nil {
		t.Fatal(err)
	}
	o := optionsFor(p, testenv.NewClock(now))
	o.JWKSURL, o.KeyFile = "", file
	v := newVerifier(t, o)
	wantSession(t, v, p.Token(1, now), 1, false)
	wantSession(t, v, p.Sign("ec", p.Claims(2, now)), 2, false)
	forger := testenv.NewIdP()
	forger.Close()
	wantRefused(t, v, forger.Token(3, now))
}

func TestNewRefusesUnsafeOptions(t *testing.T) {
	p := newIdP(t)
	private := filepath.Join(t.TempDir(), "private.pem")
	if err := os.WriteFile(private, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*jwtsession.Options){
		"alg_none":     func(o *jwtsession.Options) { o.Algs = []string{"RS256", "none"} },
		"alg_hmac":     func(o *jwtsession.Options) { o.Algs = []string{"HS256"} },
		"alg_unknown":  func(o *jwtsession.Options) { o.Algs = []string{"RS999"} },
		"no_alg":       func(o *jwtsession.Options) { o.Algs = []string{} },
		"no_keys":      func(o *jwtsession.Options) { o.JWKSURL = "" },
		"url_and_file": func(o *jwtsession.Options) { o.KeyFile = private },
		"private_key":  func(o *jwtsession.Options) { o.JWKSURL, o.KeyFile = "", private },
		"missing_file": func(o *jwtsession.Options) { o.JWKSURL, o.KeyFile = "", private+".gone" },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			o := optionsFor(p, nil)
			edit(&o)
			if v, err := jwtsession.New(o); err == nil {
				v.Close()
				t.Fatal("New accepted them")
			}
		})
	}
}

// BenchmarkSessionFirstUse is what a token's first request costs (a check
// of its signature and claims), by algorithm, and a later one (the cache).
func BenchmarkSessionFirstUse(b *testing.B) {
	p := testenv.NewIdP()
	defer p.Close()
	p.AddKey("ec", "ES256")
	now := testenv.Now()
	v, err := jwtsession.New(optionsFor(p, testenv.NewClock(now)))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { v.Close() }()
	for _, kid := range []string{testenv.IdPKey, "ec"} {
		tokens := make([]string, 1000)
		for i := range tokens {
			tokens[i] = p.Sign(kid, p.Claims(domain.UserID(i+1), now))
		}
		b.Run(kid, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				// A fresh verifier's worth of misses: each token once.
				if i%len(tokens) == 0 {
					v.Close()
					v, _ = jwtsession.New(optionsFor(p, testenv.NewClock(now)))
				}
				if _, _, err := v.Session(context.Background(), tokens[i%len(tokens)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("cached", func(b *testing.B) {
		token := p.Token(1, now)
		for b.Loop() {
			_, _, _ = v.Session(context.Background(), token)
		}
	})
}
