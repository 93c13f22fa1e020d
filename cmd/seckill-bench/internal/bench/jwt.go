package bench

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
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

// openPages is the users opening the sale's page in the minutes before it
// starts, as wide's users log in before it: each token's first request
// (their order list, here an order that is not theirs: 404) has the service
// verify it, and it is cached until its exp, as wide's hmdp sessions are read
// back before the sale. The first use's cost itself is
// jwtsession.BenchmarkSessionFirstUse's. It fails when a token is refused.
func (w *workload) openPages(ctx context.Context, base string) error {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	var refused atomic.Int64
	var g errgroup.Group
	g.SetLimit(64)
	for i := range w.tokens {
		g.Go(func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/voucher-order/1", http.NoBody)
			if err != nil {
				return err
			}
			req.Header = w.headers[i].Clone()
			resp, err := client.Do(req)
			if err != nil {
				return fmt.Errorf("open the sale's page: %w", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				refused.Add(1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if n := refused.Load(); n > 0 {
		return fmt.Errorf("the service refused %d of %d users' tokens", n, len(w.tokens))
	}
	return nil
}
