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

// A claim script built with OrderScript appends the message EncodeOrder
// writes: the same fields in the same order, each value the script's
// expression for that ID.
func TestOrderScriptWritesEncodeOrdersLayout(t *testing.T) {
	o, err := domain.NewVoucherOrder(77, 5, 7)
	if err != nil {
		t.Fatal(err)
	}
	exprOf := map[string]string{"77": "ARGV[2]", "5": "ARGV[1]", "7": "ARGV[3]"}
	var want []string
	enc := redisschema.EncodeOrder(o)
	for i := 0; i < len(enc); i += 2 {
		want = append(want, "'"+enc[i].(string)+"'", exprOf[fmt.Sprint(enc[i+1])])
	}
	got := redisschema.OrderScript("redis.call('XADD', KEYS[3], '*', ORDER_MESSAGE)\nreturn 'ok'", "ARGV[2]", "ARGV[1]", "ARGV[3]")
	wantScript := "redis.call('XADD', KEYS[3], '*', " + strings.Join(want, ", ") + ")\nreturn 'ok'"
	if got != wantScript {
		t.Fatalf("rendered\n%s\nwant\n%s", got, wantScript)
	}
}

func TestOrderScriptPanicsWithoutExactlyOnePlaceholder(t *testing.T) {
	for _, src := range []string{"return 'ok'", "ORDER_MESSAGE ORDER_MESSAGE"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("OrderScript(%q) did not panic", src)
				}
			}()
			redisschema.OrderScript(src, "a", "b", "c")
		}()
	}
}
