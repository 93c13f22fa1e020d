package component_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestShopWithItsOwnIdentityProviderRunsASale: a shop that logs its users in
// with its own OpenID-style provider (a JWKS over HTTP) runs a sale through
// the wired service without a Redis session: its admin (by the role claim;
// no SECKILL_ADMIN_USERS) creates the voucher, a user's JWT claims and sees
// the order, a user without the role is refused the admin endpoint, a
// forged or expired token is refused, and hmdp's tokens work beside them.
func TestShopWithItsOwnIdentityProviderRunsASale(t *testing.T) {
	idp := testenv.NewIdP()
	t.Cleanup(idp.Close)
	app, base := startServiceOn(t, infra.QueueStream, "redis", func(c *infra.Config) {
		c.AdminUsers = ""
		c.JWT.JWKSURL, c.JWT.Issuer, c.JWT.Audience = idp.JWKSURL(), idp.Issuer, idp.Audience
		c.JWT.AdminRole = "seckill-admin"
	})
	now := time.Now()
	bearer := func(user domain.UserID, roles ...string) string { return "Bearer " + idp.Token(user, now, roles...) }

	if status, env := postJSON(t, http.DefaultClient, base+"/voucher/seckill", bearer(7001, "reader"), saleBody(2)); status != http.StatusForbidden || env.Code != "forbidden" {
		t.Fatalf("a user without the admin role created a voucher: %d %+v", status, env)
	}
	vid := createVoucherAs(t, app, bearer(7000, "seckill-admin"), 2)

	user := bearer(7001)
	claimed := claim(t, app, vid, user)
	if !claimed.Success {
		t.Fatalf("the provider's user could not claim: %+v", claimed)
	}
	order := orderIDOf(t, claimed)
	testenv.Eventually(t, 10*time.Second, func() (bool, string) {
		status, env := sendRoom(t, http.MethodGet, fmt.Sprintf("%s/voucher-order/%d", base, order), user, nil)
		var got struct{ State string }
		_ = json.Unmarshal(env.Data, &got)
		return status == http.StatusOK && got.State == "created", fmt.Sprintf("%d %s", status, env.Data)
	})
	if again := claim(t, app, vid, "Bearer "+idp.Token(7001, now.Add(time.Second))); again.Code != "duplicate" {
		t.Fatalf("the same user's second claim, with another token: %+v", again)
	}
	mustClaim(t, app, vid, 7002) // an hmdp token, beside

	forger := testenv.NewIdP()
	forger.Close()
	expired := idp.Claims(7003, now)
	expired["iat"], expired["exp"] = now.Add(-2*time.Hour).Unix(), now.Add(-time.Hour).Unix()
	for name, token := range map[string]string{
		"forged":  "Bearer " + forger.Token(7003, now),
		"expired": "Bearer " + idp.Sign(testenv.IdPKey, jwt.MapClaims(expired)),
	} {
		if status, env := postJSON(t, http.DefaultClient, fmt.Sprintf("%s/voucher-order/seckill/%d", base, vid), token, nil); status != http.StatusUnauthorized {
			t.Errorf("%s token: %d %+v, want 401", name, status, env)
		}
	}
}
