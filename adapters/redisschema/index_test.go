package redisschema_test

import (
	"testing"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

func TestOrderIndexRoundTrips(t *testing.T) {
	o, err := domain.NewVoucherOrder(1<<62+3, 1<<40+5, 42)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{1, 2, domain.MaxBuckets} {
		got, ok := redisschema.DecodeOrderIndex(redisschema.EncodeOrderIndex(o, k))
		if !ok || got != (redisschema.OrderIndex{Voucher: 42, User: o.UserID(), Buckets: k}) {
			t.Fatalf("K=%d: decoded %+v, %v", k, got, ok)
		}
	}
	for _, raw := range []string{"", "42", "42:7:1", "42:7:0", "42:7:99", "x:7", "42:y", "0:7", "42:-1", "1:2:3:4"} {
		if got, ok := redisschema.DecodeOrderIndex(raw); ok {
			t.Errorf("%q decoded to %+v, want refused", raw, got)
		}
	}
}
