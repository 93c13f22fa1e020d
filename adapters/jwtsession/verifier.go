// Package jwtsession verifies the JWTs of a shop's identity provider against its
// keys (a refreshed JWKS, or a PEM file) and resolves each to its user and admin
// role. A verified token is kept in memory until it expires.
package jwtsession

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/hmdp-go/seckill/adapters/internal/tokencache"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Leeway is the clock skew allowed on exp, nbf and iat.
const Leeway = 30 * time.Second

const (
	// refreshEvery: a key the provider withdrew stops verifying within it.
	refreshEvery = 15 * time.Minute
	// unknownKIDEvery spaces the fetches an unknown kid may cause; other such tokens are refused at once.
	unknownKIDEvery = 30 * time.Second
	maxTokenLen     = 8 << 10         // refused unread: no provider issues more
	fetchBudget     = 2 * time.Second // bounds a JWKS fetch, a request's for an unknown kid included
)

// asymmetric are the algorithms a key set may be trusted with: HMAC would take a public key as its secret.
var asymmetric = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// CheckAlgs refuses an empty list and any algorithm that is not asymmetric.
func CheckAlgs(algs []string) error {
	if len(algs) == 0 {
		return errors.New("no algorithm allowed")
	}
	for _, a := range algs {
		if !slices.Contains(asymmetric, a) {
			return fmt.Errorf("algorithm %q is not allowed: only RS*, PS*, ES* and EdDSA are, never none or HMAC", a)
		}
	}
	return nil
}

// Options configure a Verifier: exactly one of JWKSURL and KeyFile names the keys;
// Issuer and Audience are checked when set.
type Options struct {
	JWKSURL string
	// KeyFile holds PEM "PUBLIC KEY" blocks; every key is tried, whatever the kid.
	KeyFile, Issuer, Audience string
	Algs                      []string // accepted (CheckAlgs); nil means RS256 and ES256
	UserClaim                 string   // the claim holding the numeric user id ("": sub)
	// AdminRole, when set, makes an admin of a token whose RolesClaim ("": roles) holds it.
	AdminRole, RolesClaim string
	CacheSize             int
	Clock                 ports.Clock // what tokens are checked against; nil: the wall clock
	Log                   zerolog.Logger
}

// Verifier is a ports.BearerSessions. Make one per process; Close stops the key set's refresh.
type Verifier struct {
	keys                             func(context.Context) jwt.Keyfunc
	parser                           *jwt.Parser
	userClaim, rolesClaim, adminRole string
	clock                            ports.Clock
	cache                            *tokencache.Cache[session]
	stop                             context.CancelFunc
}

type session struct {
	user  domain.UserID
	admin bool
}

var _ ports.BearerSessions = (*Verifier)(nil)

// New checks the options and loads the keys. A JWKS that does not answer at start
// is logged, not an error: tokens are refused until a fetch succeeds.
func New(o Options) (*Verifier, error) {
	if o.Algs == nil {
		o.Algs = []string{"RS256", "ES256"}
	}
	if err := CheckAlgs(o.Algs); err != nil {
		return nil, err
	}
	if (o.JWKSURL == "") == (o.KeyFile == "") {
		return nil, errors.New("exactly one of a JWKS URL and a key file is needed")
	}
	if o.CacheSize <= 0 {
		o.CacheSize = tokencache.DefaultSize
	}
	if o.Clock == nil {
		o.Clock = ports.SystemClock{}
	}
	checks := []jwt.ParserOption{jwt.WithValidMethods(o.Algs), jwt.WithExpirationRequired(), jwt.WithLeeway(Leeway),
		jwt.WithTimeFunc(o.Clock.Now), jwt.WithJSONNumber()}
	if o.Issuer != "" {
		checks = append(checks, jwt.WithIssuer(o.Issuer))
	}
	if o.Audience != "" {
		checks = append(checks, jwt.WithAudience(o.Audience))
	}
	v := &Verifier{userClaim: cmp.Or(o.UserClaim, "sub"), rolesClaim: cmp.Or(o.RolesClaim, "roles"), adminRole: o.AdminRole,
		clock: o.Clock, cache: tokencache.New[session](o.CacheSize), parser: jwt.NewParser(checks...), stop: func() {}}
	// Entries end at the token's exp, on the parser's clock.
	v.cache.Now = func() time.Duration { return time.Duration(v.clock.Now().UnixNano()) }
	if o.KeyFile != "" {
		keys, err := readKeyFile(o.KeyFile)
		if err != nil {
			return nil, err
		}
		set := jwt.VerificationKeySet{Keys: keys}
		v.keys = func(context.Context) jwt.Keyfunc { return func(*jwt.Token) (any, error) { return set, nil } }
		return v, nil
	}
	ctx, stop := context.WithCancel(context.Background())
	k, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{o.JWKSURL}, keyfunc.Override{
		HTTPTimeout:       fetchBudget,
		RefreshInterval:   refreshEvery,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(unknownKIDEvery), 1),
		// A request waits for a fetch slot at most this (never for the next slot).
		RateLimitWaitMax: fetchBudget,
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				o.Log.Warn().Err(err).Str("jwks", u).Msg("JWKS fetch failed: the keys fetched last stay in use")
			}
		},
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("JWKS %s: %w", o.JWKSURL, err)
	}
	v.keys, v.stop = k.KeyfuncCtx, stop
	return v, nil
}

// readKeyFile reads public keys only: a private key should not be on this machine.
func readKeyFile(path string) ([]jwt.VerificationKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []jwt.VerificationKey
	for {
		var b *pem.Block
		if b, raw = pem.Decode(raw); b == nil {
			break
		}
		if b.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("key file %s: a %q block; only PUBLIC KEY blocks are read", path, b.Type)
		}
		k, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("key file %s: %w", path, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("key file %s: no PEM PUBLIC KEY block", path)
	}
	return keys, nil
}

func (v *Verifier) Close() { v.stop() }

// Session answers a token verified before from memory until its exp; otherwise it
// checks the signature, algorithm, issuer, audience, exp and nbf.
func (v *Verifier) Session(ctx context.Context, token string) (domain.UserID, bool, error) {
	if token == "" || len(token) > maxTokenLen {
		return 0, false, ports.ErrUnknownToken
	}
	if s, ok := v.cache.Get(token); ok {
		return s.user, s.admin, nil
	}
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(token, claims, v.keys(ctx)); err != nil {
		return 0, false, fmt.Errorf("%w: %w", ports.ErrUnknownToken, err)
	}
	user, err := userID(claims[v.userClaim])
	if err != nil {
		return 0, false, fmt.Errorf("%w: claim %q: %w", ports.ErrUnknownToken, v.userClaim, err)
	}
	s := session{user: user, admin: v.adminRole != "" && holds(claims[v.rolesClaim], v.adminRole)}
	exp, _ := claims.GetExpirationTime() // required by the parse
	if life := exp.Sub(v.clock.Now()); life > 0 {
		v.cache.AddFor(token, s, life, 0, 0)
	}
	return s.user, s.admin, nil
}

// userID reads a positive user id from a string or a JSON number.
func userID(claim any) (domain.UserID, error) {
	var s string
	switch c := claim.(type) {
	case string:
		s = c
	case json.Number:
		s = c.String()
	case nil:
		return 0, errors.New("missing")
	default:
		return 0, fmt.Errorf("a %T, not a user id", claim)
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%q is not a positive user id", s)
	}
	return domain.UserID(id), nil
}

// holds tells whether a roles claim (a list of strings, or one string) holds role.
func holds(claim any, role string) bool {
	switch c := claim.(type) {
	case string:
		return c == role
	case []any:
		return slices.Contains(c, any(role))
	}
	return false
}
