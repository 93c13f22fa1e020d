package domain_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hmdp-go/seckill/domain"
)

func TestCheckIdempotencyKey(t *testing.T) {
	tests := []struct {
		name string
		key  string
		ok   bool
	}{
		{"none", "", true},
		{"printable", "order-2026/11:29~x", true},
		{"longest", strings.Repeat("k", domain.MaxIdempotencyKey), true},
		{"too_long", strings.Repeat("k", domain.MaxIdempotencyKey+1), false},
		{"space", "a b", false},
		{"control", "a\tb", false},
		{"del", "a\x7f", false},
		{"not_ascii", "clé", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := domain.CheckIdempotencyKey(tt.key)
			var ve *domain.ValidationError
			if tt.ok != (err == nil) || (err != nil && (!errors.As(err, &ve) || ve.Field != "Idempotency-Key")) {
				t.Fatalf("CheckIdempotencyKey(%q) = %v, want ok %v", tt.key, err, tt.ok)
			}
		})
	}
}
