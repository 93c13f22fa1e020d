package redisgate_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/ports"
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

// TestATransferWaitsForTheDonorsReplicas: with WAIT on, a claim that moves
// units from a donor bucket on another master is answered only once the
// donor's replica holds the take too. The claim's own WAIT covers its home's
// master only: answered with the donor's replica behind, a failover of the
// donor would give it the units back while the home keeps them, and a
// success would be answered for a unit the database then refuses. With the
// donor's replica stalled (SIGSTOP) the claim is not admitted; resumed, the
// claim goes through.
func TestATransferWaitsForTheDonorsReplicas(t *testing.T) {
	rc := testenv.StartRedisCluster(t, 3, 1, 5*time.Second)
	rdb := rc.Client()
	g := redisgate.New(rdb, redisgate.Options{Prefix: "w:", WaitReplicas: 1, WaitTimeout: 300 * time.Millisecond,
		ApplyDeadline: 150 * time.Millisecond, Skew: 50 * time.Millisecond})
	v := splitInto(t, newVoucher(t, 2), 2) // one unit a bucket
	if err := g.Preheat(ctx(t), v); err != nil {
		t.Fatal(err)
	}
	home, donor := redisschema.KeysForTag("w:", redisschema.BucketTag(v.ID(), 0, 2)),
		redisschema.KeysForTag("w:", redisschema.BucketTag(v.ID(), 1, 2))
	if rc.MasterOf(home.Voucher) == rc.MasterOf(donor.Voucher) {
		t.Fatal("both buckets on one master: Preheat should have spread them")
	}
	first := userIn(0, 2, 1)
	if err := g.ReserveAndAppend(ctx(t), orderFor(t, first, v.ID())); err != nil {
		t.Fatalf("claim of the home's own unit: %v", err)
	}
	replica := rc.ReplicaOf(rc.MasterOf(donor.Voucher))
	replica.Stall()
	o := orderFor(t, userIn(0, 2, first+1), v.ID())
	if err := g.ReserveAndAppend(ctx(t), o); err == nil || !errors.Is(err, ports.ErrNotAdmitted) {
		t.Fatalf("claim that needs the donor's unit while the donor's replica is stalled: %v, want not admitted", err)
	}
	if n, _ := g.Pending(ctx(t), v.ID()); n != 1 {
		t.Fatalf("%d orders queued, want only the first", n)
	}
	replica.Resume()
	testenv.Eventually(t, 20*time.Second, func() (bool, string) {
		err := g.ReserveAndAppend(ctx(t), o)
		return err == nil, "claim after the donor's replica resumed: " + strconv.Quote(errText(err))
	})
	books(t, g, v.ID(), 0)
}
