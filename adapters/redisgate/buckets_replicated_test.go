package redisgate_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestSplitClaimWaitsForItsReplicas: a split voucher's claim, like an unsplit
// one's, is answered only once a replica holds it. With the replica stalled
// (SIGSTOP) the claim is reported not replicated; resumed, it is confirmed.
func TestSplitClaimWaitsForItsReplicas(t *testing.T) {
	master, replica := testenv.StartReplicated(t)
	ctx := context.Background()
	g := redisgate.New(master.Client(), redisgate.Options{Prefix: "w:", WaitReplicas: 1, WaitTimeout: 300 * time.Millisecond})
	v := newVoucher(t, 10)
	if err := g.Preheat(ctx, splitInto(t, v, 2)); err != nil {
		t.Fatal(err)
	}
	if err := g.ReserveAndAppend(ctx, orderFor(t, 1, v.ID())); err != nil {
		t.Fatalf("claim with the replica in sync: %v", err)
	}
	replica.Stall()
	if err := g.ReserveAndAppend(ctx, orderFor(t, 2, v.ID())); !errors.Is(err, redisx.ErrNotReplicated) {
		t.Fatalf("claim while the replica is stalled: %v, want ErrNotReplicated", err)
	}
	replica.Resume()
	o := orderFor(t, 3, v.ID())
	testenv.Eventually(t, 20*time.Second, func() (bool, string) {
		err := g.ReserveAndAppend(ctx, o)
		return err == nil, "claim after the replica resumed: " + strconv.Quote(errText(err))
	})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
