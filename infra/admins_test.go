package infra_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/infra"
)

// TestStartSaysHowToEnableAdmins: with no admin the service still starts,
// and its log tells the operator which variable enables voucher creation.
func TestStartSaysHowToEnableAdmins(t *testing.T) {
	for _, tc := range []struct {
		admins, want string
	}{
		{"", "set SECKILL_ADMIN_USERS"},
		{"1,42", "admin endpoints enabled"},
	} {
		t.Run("admins="+tc.admins, func(t *testing.T) {
			cfg := infra.DefaultConfig()
			cfg.DataDir = t.TempDir()
			cfg.AdminUsers = tc.admins
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			_, cleanup, err := infra.Build(cfg, zerolog.New(&logs))
			if err != nil {
				t.Fatal(err)
			}
			cleanup()
			if !strings.Contains(logs.String(), tc.want) {
				t.Fatalf("start log does not say %q:\n%s", tc.want, logs.String())
			}
		})
	}
}
