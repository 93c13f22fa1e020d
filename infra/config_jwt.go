package infra

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/hmdp-go/seckill/adapters/jwtsession"
)

// JWT: sessions from the shop's own identity provider, accepted as
// `Authorization: Bearer <JWT>` beside hmdp's tokens.
type JWT struct {
	JWKSURL    string `env:"SECKILL_JWT_JWKS_URL" help:"the shop's identity provider's JWKS: Authorization: Bearer <JWT> is accepted beside hmdp's tokens"`
	KeyFile    string `env:"SECKILL_JWT_KEY_FILE" help:"instead of a JWKS URL, a PEM file of the provider's public keys"`
	Issuer     string `env:"SECKILL_JWT_ISSUER" help:"the tokens' iss, checked when set: the provider (unset, the start warns)"`
	Audience   string `env:"SECKILL_JWT_AUDIENCE" help:"the tokens' aud, checked when set: this service at the provider (unset, the start warns)"`
	Algs       string `env:"SECKILL_JWT_ALGS" envDefault:"RS256,ES256" help:"the signature algorithms accepted: asymmetric only (RS*, PS*, ES*, EdDSA)"`
	UserClaim  string `env:"SECKILL_JWT_USER_CLAIM" envDefault:"sub" help:"the claim holding the numeric user id"`
	RolesClaim string `env:"SECKILL_JWT_ROLES_CLAIM" envDefault:"roles" help:"the claim holding the roles (a list of strings, or one)"`
	AdminRole  string `env:"SECKILL_JWT_ADMIN_ROLE" help:"a role in the provider's roles claim that makes its holder an admin (beside SECKILL_ADMIN_USERS)"`
}

// unchecked names the unset issuer and audience, for the start's warning.
func (j JWT) unchecked() []string {
	var out []string
	if j.Issuer == "" {
		out = append(out, "SECKILL_JWT_ISSUER")
	}
	if j.Audience == "" {
		out = append(out, "SECKILL_JWT_AUDIENCE")
	}
	return out
}

func (j JWT) on() bool { return j.JWKSURL != "" || j.KeyFile != "" }

func (j JWT) algs() []string {
	var out []string
	for _, a := range strings.Split(j.Algs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func (j JWT) check(p *problems) {
	algsErr := jwtsession.CheckAlgs(j.algs())
	u, urlErr := url.Parse(j.JWKSURL)
	const unread = "is set but no token is checked against it: set SECKILL_JWT_JWKS_URL or SECKILL_JWT_KEY_FILE"
	p.report(
		rule{"SECKILL_JWT_ALGS", algsErr != nil, fmt.Sprint(algsErr)},
		rule{"SECKILL_JWT_JWKS_URL", j.JWKSURL != "" && j.KeyFile != "", "is exclusive with SECKILL_JWT_KEY_FILE: name the provider's keys once"},
		rule{"SECKILL_JWT_JWKS_URL", j.JWKSURL != "" && (urlErr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == ""),
			fmt.Sprintf("must be an http(s) URL, got %q", j.JWKSURL)},
		rule{"SECKILL_JWT_ISSUER", !j.on() && j.Issuer != "", unread},
		rule{"SECKILL_JWT_AUDIENCE", !j.on() && j.Audience != "", unread},
		rule{"SECKILL_JWT_ADMIN_ROLE", !j.on() && j.AdminRole != "", unread},
		rule{"SECKILL_JWT_USER_CLAIM", j.on() && j.UserClaim == "", "must name the claim of the user id"},
	)
}
