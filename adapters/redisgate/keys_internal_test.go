package redisgate

import (
	"testing"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The gate remembers the last voucher's key names; claims that alternate
// between vouchers must still get each voucher's own.
func TestKeysAreTheVouchersOwnWhateverWasClaimedBefore(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	g := New(rdb, Options{Prefix: "p:"})
	for _, id := range []domain.VoucherID{1, 1, 2, 1, 2, 2, 3} {
		if got, want := g.keys(id), redisschema.KeysFor("p:", id); got != want {
			t.Fatalf("keys(%d) = %+v, want %+v", id, got, want)
		}
	}
}
