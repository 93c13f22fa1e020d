package redisschema_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

func TestDecodeOrder(t *testing.T) {
	tests := []struct {
		name    string
		values  map[string]any
		want    string // the order, or a fragment of the error
		wantErr bool
	}{
		{"claim_script_fields", map[string]any{"id": "77", "userId": "5", "voucherId": "7"}, "order 77 (user 5, voucher 7)", false},
		{"extra_fields_are_ignored", map[string]any{"id": "77", "userId": "5", "voucherId": "7", "trace": "x"}, "order 77", false},
		{"no_fields", nil, "no fields", true},
		{"missing_user", map[string]any{"id": "77", "voucherId": "7"}, "userId is missing", true},
		{"not_a_string", map[string]any{"id": "77", "userId": 5, "voucherId": "7"}, "userId is a int", true},
		{"not_a_number", map[string]any{"id": "77", "userId": "5x", "voucherId": "7"}, "not an integer", true},
		{"overflow", map[string]any{"id": "99999999999999999999", "userId": "5", "voucherId": "7"}, "not an integer", true},
		{"another_vouchers_order", map[string]any{"id": "77", "userId": "5", "voucherId": "8"}, "not the voucher 7", true},
		{"zero_user", map[string]any{"id": "77", "userId": "0", "voucherId": "7"}, "userId", true},
		{"negative_id", map[string]any{"id": "-77", "userId": "5", "voucherId": "7"}, "orderId", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := redisschema.DecodeOrder(7, redis.XMessage{ID: "1-0", Values: tt.values})
			got := fmt.Sprint(o)
			if err != nil {
				got = err.Error()
			}
			if (err != nil) != tt.wantErr || !strings.Contains(got, tt.want) {
				t.Fatalf("DecodeOrder = %q (err %v), want %q", got, err, tt.want)
			}
			if err != nil && !errors.Is(err, redisschema.ErrBadOrderMessage) {
				t.Fatalf("error %v does not wrap ErrBadOrderMessage", err)
			}
		})
	}
}

// An encoded order comes back as itself once Redis has turned every value
// into the string it stores.
func TestEncodeOrderDecodesBack(t *testing.T) {
	o, err := domain.NewVoucherOrder(1<<53+1, 9, 7)
	if err != nil {
		t.Fatal(err)
	}
	kv := redisschema.EncodeOrder(o)
	values := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		values[kv[i].(string)] = fmt.Sprint(kv[i+1])
	}
	if len(values) != len(redisschema.OrderFields) {
		t.Fatalf("EncodeOrder wrote %v, want the fields %v", values, redisschema.OrderFields)
	}
	back, err := redisschema.DecodeOrder(7, redis.XMessage{ID: "1-0", Values: values})
	if err != nil || back != o {
		t.Fatalf("DecodeOrder(EncodeOrder(%v)) = %v, %v", o, back, err)
	}
}
