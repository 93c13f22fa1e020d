package testenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/hmdp-go/seckill/domain"
)

// IdP is a shop's own identity provider, as tests and the bench need one: it
// makes its signing keys, signs tokens with them and serves their public
// halves as a JWKS over HTTP. A key can be added (a rotation) and the JWKS
// can stop answering. Safe for concurrent use.
type IdP struct {
	Issuer, Audience string

	srv     *httptest.Server
	mu      sync.Mutex
	keys    map[string]idpKey
	down    atomic.Bool
	fetches atomic.Int64
}

type idpKey struct {
	method jwt.SigningMethod
	key    crypto.Signer
}

// IdPKey is the kid of the key NewIdP starts with (RS256).
const IdPKey = "k1"

// NewIdP starts a provider with one RS256 key, IdPKey; Close stops it.
func NewIdP() *IdP {
	p := &IdP{Issuer: "https://idp.shop.test", Audience: "seckill", keys: map[string]idpKey{}}
	p.AddKey(IdPKey, "RS256")
	p.srv = httptest.NewServer(http.HandlerFunc(p.serveJWKS))
	return p
}

// JWKSURL is where the provider serves its keys.
func (p *IdP) JWKSURL() string { return p.srv.URL + "/jwks.json" }

func (p *IdP) Close() { p.srv.Close() }

// SetDown makes the JWKS answer 503 (true) or its keys again (false).
func (p *IdP) SetDown(down bool) { p.down.Store(down) }

// Fetches tells how many times the JWKS was asked for.
func (p *IdP) Fetches() int64 { return p.fetches.Load() }

// AddKey makes a key for alg (RS256 or ES256) and publishes it as kid.
func (p *IdP) AddKey(kid, alg string) {
	var k idpKey
	var err error
	switch alg {
	case "RS256":
		k.method = jwt.SigningMethodRS256
		k.key, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		k.method = jwt.SigningMethodES256
		k.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		panic("testenv: IdP keys are RS256 or ES256, not " + alg)
	}
	if err != nil {
		panic(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys[kid] = k
}

// PublicKey is kid's public key.
func (p *IdP) PublicKey(kid string) crypto.PublicKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[kid].key.Public()
}

// Sign signs claims with kid's key, naming kid in the header.
func (p *IdP) Sign(kid string, claims jwt.MapClaims) string {
	p.mu.Lock()
	k, ok := p.keys[kid]
	p.mu.Unlock()
	if !ok {
		panic("testenv: the IdP has no key " + kid)
	}
	tok := jwt.NewWithClaims(k.method, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(k.key)
	if err != nil {
		panic(err)
	}
	return s
}

// Claims are a valid token's claims for user at now, valid for an hour,
// with roles in "roles" when any are given.
func (p *IdP) Claims(user domain.UserID, now time.Time, roles ...string) jwt.MapClaims {
	c := jwt.MapClaims{
		"iss": p.Issuer, "aud": p.Audience, "sub": fmt.Sprint(user),
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	if len(roles) > 0 {
		c["roles"] = roles
	}
	return c
}

// Token is a valid token for user at now, signed with IdPKey.
func (p *IdP) Token(user domain.UserID, now time.Time, roles ...string) string {
	return p.Sign(IdPKey, p.Claims(user, now, roles...))
}

func (p *IdP) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	p.fetches.Add(1)
	if p.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	var set jwkset.JWKSMarshal
	p.mu.Lock()
	for kid, k := range p.keys {
		jwk, err := jwkset.NewJWKFromKey(k.key.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{
			KID: kid, ALG: jwkset.ALG(k.method.Alg()), USE: jwkset.UseSig,
		}})
		if err != nil {
			panic(err)
		}
		set.Keys = append(set.Keys, jwk.Marshal())
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(set)
}
