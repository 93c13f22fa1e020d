package redisschema_test

import (
	"testing"

	"github.com/hmdp-go/seckill/adapters/redisschema"
)

func TestKeysShareTheVouchersHashTag(t *testing.T) {
	k := redisschema.KeysFor("seckill:", 42)
	want := redisschema.Keys{Voucher: "seckill:{42}:voucher", Buyers: "seckill:{42}:buyers", Orders: "seckill:{42}:orders", Live: "seckill:vouchers"}
	if k.Voucher != want.Voucher || k.Buyers != want.Buyers || k.Orders != want.Orders || k.Live != want.Live {
		t.Fatalf("KeysFor = %+v, want %+v", k, want)
	}
	if got := k.Staging("abc"); got != "seckill:{42}:restore:abc" {
		t.Fatalf("Staging = %q, want it under the voucher's hash tag", got)
	}
}

func TestValidatePrefix(t *testing.T) {
	tests := []struct {
		prefix string
		ok     bool
	}{
		{"seckill:", true},
		{"", true},
		{"a/b:", true},
		{"app{x}:", false},
		{"app{", false},
		{"}", false},
	}
	for _, tt := range tests {
		if err := redisschema.ValidatePrefix(tt.prefix); (err == nil) != tt.ok {
			t.Fatalf("ValidatePrefix(%q) = %v, want ok %v", tt.prefix, err, tt.ok)
		}
	}
}
