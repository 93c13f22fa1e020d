package bench

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/sync/errgroup"

	"github.com/hmdp-go/seckill/infra"
)

// The shop's identity provider of the wide-jwt sale: a key of the bench's
// own, whose public half the service reads from a key file. What is measured
// is the service's check of each token, which costs the same whether its key
// came from a file or a JWKS.
const (
	benchIssuer   = "https://idp.bench.test"
	benchAudience = "seckill"
)

// useIdP makes the provider's key and points c at its public half, in file.
// RS256, what OpenID providers sign with unless told otherwise (ES256's
// check costs the service about three times as much: BenchmarkSessionFirstUse).
func useIdP(c *infra.Config, file string) (*rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	c.JWT.KeyFile, c.JWT.Issuer, c.JWT.Audience, c.JWT.Algs = file, benchIssuer, benchAudience, "RS256"
	return key, c.Validate()
}

// mintJWT gives every user a token of the provider's, as the shop's login
// would; the service has seen none of them. An RSA signature takes a
// millisecond or more: the tokens are signed on every core.
func (w *workload) mintJWT(key *rsa.PrivateKey) error {
	w.tokens = make([]string, len(w.users))
	w.headers = make([]http.Header, len(w.users))
	now := time.Now()
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, u := range w.users {
		g.Go(func() error {
			tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
				"iss": benchIssuer, "aud": benchAudience, "sub": strconv.FormatInt(int64(u), 10),
				"iat": now.Unix(), "exp": now.Add(tokenTTL).Unix(),
			}).SignedString(key)
			if err != nil {
				return fmt.Errorf("sign a token: %w", err)
			}
			w.tokens[i] = "Bearer " + tok
			w.headers[i] = http.Header{"Authorization": {w.tokens[i]}, "X-Real-Ip": {userAddr(i)}}
			return nil
		})
	}
	return g.Wait()
}
