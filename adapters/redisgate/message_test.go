package redisgate_test

import (
	"context"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The claim script writes the order message and the stream consumer reads it
// with redisschema.DecodeOrder: what the script appends must decode to the
// order reserved, with nothing but the codec's fields.
func TestClaimScriptWritesTheCodecsOrderMessage(t *testing.T) {
	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			prefix := testenv.KeyPrefix(t)
			testenv.DropPrefix(t, rdb, prefix)
			ctx := context.Background()
			g := redisgate.New(rdb, redisgate.Options{Prefix: prefix})
			now := testenv.WallClock{}.Now()
			if err := g.Preheat(ctx, voucher(t, 42, 5, now.Add(-time.Minute), now.Add(time.Hour))); err != nil {
				t.Fatal(err)
			}
			// IDs past 2^53 would lose digits if any step went through a Lua number.
			want := []domain.VoucherOrder{order(t, 1<<53+1, 7, 42), order(t, 1<<62+3, 1<<40+5, 42)}
			for _, o := range want {
				if err := g.ReserveAndAppend(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			msgs, err := rdb.XRange(ctx, redisschema.KeysFor(prefix, 42).Orders, "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != len(want) {
				t.Fatalf("stream holds %d messages, want %d", len(msgs), len(want))
			}
			for i, m := range msgs {
				got, err := redisschema.DecodeOrder(42, m)
				if err != nil || got != want[i] {
					t.Fatalf("message %d %v decodes to %v, %v; want %v", i, m.Values, got, err, want[i])
				}
				if len(m.Values) != len(redisschema.OrderFields) {
					t.Fatalf("message %d has fields %v, want exactly %v", i, m.Values, redisschema.OrderFields)
				}
			}
		})
	}
}
