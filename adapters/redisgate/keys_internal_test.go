package redisgate

import (
	"context"
	"testing"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The gate remembers the last voucher's layout; claims that alternate
// between vouchers must still get each voucher's own keys.
func TestKeysAreTheVouchersOwnWhateverWasClaimedBefore(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	g := New(rdb, Options{Prefix: "p:"})
	for _, id := range []domain.VoucherID{1, 1, 2, 1, 2, 2, 3} {
		l, err := g.layoutOf(context.Background(), id)
		if err != nil || l.k != 1 {
			t.Fatalf("layout of %d: %+v, %v", id, l, err)
		}
		if got, want := l.buckets[0], redisschema.KeysFor("p:", id); got != want {
			t.Fatalf("keys(%d) = %+v, want %+v", id, got, want)
		}
	}
}
