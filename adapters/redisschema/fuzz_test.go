package redisschema_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// FuzzDecodeOrder feeds DecodeOrder stream entries as a producer other than
// the claim script (or a corrupted one) might write them. Whatever the entry,
// DecodeOrder must not panic; a refusal must wrap ErrBadOrderMessage (the
// stream adapter dead-letters on it); an accepted entry must be an order of
// the stream's voucher whose fields are the entry's integers, and re-encoding
// it must give back an equivalent message: the same order once Redis has
// stored its values as strings. Seeds are in testdata/fuzz; `make fuzz` runs
// it for a few seconds.
//
// shape says which fields the entry has: bit i (i = 0, 1, 2 for the fields of
// OrderFields) keeps field i, bit i+3 stores it as an int64 rather than the
// string Redis hands back. extraKey/extraVal add one more field, which may
// overwrite one of the order's.
func FuzzDecodeOrder(f *testing.F) {
	f.Add(int64(7), byte(0b111), "77", "5", "7", "", "") // what the claim script writes; the rest are in testdata
	f.Fuzz(func(t *testing.T, vid int64, shape byte, id, user, voucher, extraKey, extraVal string) {
		values := map[string]any{}
		for i, s := range [...]string{id, user, voucher} {
			if shape&(1<<i) == 0 {
				continue
			}
			values[redisschema.OrderFields[i]] = s
			if shape&(1<<(i+3)) != 0 {
				n, _ := strconv.ParseInt(s, 10, 64)
				values[redisschema.OrderFields[i]] = n
			}
		}
		if extraKey != "" {
			values[extraKey] = extraVal
		}
		if len(values) == 0 {
			values = nil // as go-redis hands back an entry deleted while pending
		}

		o, err := redisschema.DecodeOrder(domain.VoucherID(vid), redis.XMessage{ID: "1-0", Values: values})
		if err != nil {
			if !errors.Is(err, redisschema.ErrBadOrderMessage) {
				t.Fatalf("DecodeOrder(%v): error %v does not wrap ErrBadOrderMessage", values, err)
			}
			return
		}

		// Accepted: it is the entry's order, for the stream's voucher.
		got := [...]int64{int64(o.ID()), int64(o.UserID()), int64(o.VoucherID())}
		for i, f := range redisschema.OrderFields {
			s, ok := values[f].(string)
			if !ok {
				t.Fatalf("DecodeOrder(%v) accepted field %s of type %T", values, f, values[f])
			}
			if n, err := strconv.ParseInt(s, 10, 64); err != nil || n != got[i] {
				t.Fatalf("DecodeOrder(%v) = %v: field %s=%q is not %d", values, o, f, s, got[i])
			}
			if got[i] <= 0 {
				t.Fatalf("DecodeOrder(%v) = %v: field %s is not a positive id", values, o, f)
			}
		}
		if o.VoucherID() != domain.VoucherID(vid) {
			t.Fatalf("DecodeOrder(%v) = %v, an order of another voucher than %d", values, o, vid)
		}

		// Re-encoded, as Redis stores it, it is the same message: exactly the
		// order's fields, in canonical decimal, decoding to the same order.
		kv := redisschema.EncodeOrder(o)
		stored := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			stored[kv[i].(string)] = strconv.FormatInt(kv[i+1].(int64), 10)
		}
		if len(stored) != len(redisschema.OrderFields) || len(kv) != 2*len(redisschema.OrderFields) {
			t.Fatalf("EncodeOrder(%v) = %v, want the fields %v once each", o, kv, redisschema.OrderFields)
		}
		for i, f := range redisschema.OrderFields {
			if want := strconv.FormatInt(got[i], 10); stored[f] != want {
				t.Fatalf("EncodeOrder(%v): field %s=%v, want %s", o, f, stored[f], want)
			}
		}
		back, err := redisschema.DecodeOrder(domain.VoucherID(vid), redis.XMessage{ID: "1-0", Values: stored})
		if err != nil || back != o {
			t.Fatalf("DecodeOrder(EncodeOrder(%v)) = %v, %v", o, back, err)
		}
	})
}
