package redisgate

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// claimCmdsAllocBudget is what building a claim's two commands allocates:
// the argument slice, the three boxed ids and the command of the script; the
// index entry's key, value, their boxes, argument slice and command. 14 when every
// argument was boxed on every claim.
const claimCmdsAllocBudget = 11

func TestClaimCommandsAllocationsStayWithinBudget(t *testing.T) {
	g := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:0"}), Options{Prefix: "a:"})
	o, err := domain.NewVoucherOrder(domain.OrderID(1<<40+12345), 123456789, 4242)
	if err != nil {
		t.Fatal(err)
	}
	l := g.known(o.VoucherID(), 1)
	ctx := context.Background()
	got := testing.AllocsPerRun(200, func() { g.claimCmds(ctx, l, 0, o, true) })
	t.Logf("%.1f allocations to build a claim's commands (budget %d)", got, claimCmdsAllocBudget)
	if got > claimCmdsAllocBudget {
		t.Fatalf("%.1f allocations to build a claim's commands, budget %d", got, claimCmdsAllocBudget)
	}
}

// TestClaimCommandsAreTheScriptsArguments: the boxed-once arguments make the
// command claim.lua documents (a retry sends it again as it is).
func TestClaimCommandsAreTheScriptsArguments(t *testing.T) {
	g := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:0"}), Options{Prefix: "a:"})
	o, err := domain.NewVoucherOrder(domain.OrderID(1<<40+12345), 123456789, 4242)
	if err != nil {
		t.Fatal(err)
	}
	k := redisschema.KeysFor("a:", o.VoucherID())
	for _, appendOrder := range []bool{false, true} {
		run, index := g.claimCmds(context.Background(), g.known(o.VoucherID(), 1), 0, o, appendOrder)
		flag := map[bool]string{false: "0", true: "1"}[appendOrder]
		want := fmt.Sprint([]any{"evalsha", claimScript.Hash(), 3, k.Voucher, k.Buyers, k.Orders,
			int64(123456789), int64(1<<40 + 12345), int64(4242), flag, DefaultRetention.Milliseconds()})
		if got := fmt.Sprint(run.Args()); got != want {
			t.Fatalf("claim command %s, want %s", got, want)
		}
		wantIndex := fmt.Sprint([]any{"set", redisschema.OrderIndexKey("a:", o.ID()), redisschema.EncodeOrderIndex(o, 1), "px", minIndexTTL.Milliseconds()})
		if got := fmt.Sprint(index.Args()); got != wantIndex {
			t.Fatalf("index command %s, want %s", got, wantIndex)
		}
	}
}
