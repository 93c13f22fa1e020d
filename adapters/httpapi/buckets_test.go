package httpapi_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/domain"
)

// A voucher's "buckets" reaches the repository as asked; without it, the
// configured rule splits a sale above its stock threshold, and only those.
func TestVoucherBuckets(t *testing.T) {
	e := newEnv(t, options{split: httpapi.SplitRule{Above: 100, Into: 3}})
	for _, tc := range []struct {
		name  string
		over  map[string]string
		wantK int
	}{
		{"explicit", map[string]string{"buckets": "4", "stock": "50"}, 4},
		{"explicit_one_beats_the_rule", map[string]string{"buckets": "1", "stock": "500"}, 1},
		{"rule_above_threshold", map[string]string{"stock": "101"}, 3},
		{"rule_at_threshold", map[string]string{"stock": "100"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := e.mustOK(req{method: "POST", path: "/voucher/seckill", token: e.adminToken(), body: validVoucher(tc.over)}).dataString(t)
			n, _ := strconv.ParseInt(id, 10, 64)
			v, err := e.stored.Get(context.Background(), domain.VoucherID(n))
			if err != nil {
				t.Fatal(err)
			}
			if v.Sale().Buckets() != tc.wantK {
				t.Fatalf("stored with %d buckets, want %d", v.Sale().Buckets(), tc.wantK)
			}
		})
	}
}
