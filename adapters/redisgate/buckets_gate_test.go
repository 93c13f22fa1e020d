package redisgate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

var nextVoucher = domain.VoucherID(time.Now().UnixNano()%1_000_000 + 1000)

func newVoucher(t testing.TB, stock int) domain.Voucher {
	t.Helper()
	now := testenv.WallClock{}.Now()
	sale, err := domain.NewSale(stock, now.Add(-time.Minute), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "hot"}, sale)
	if err != nil {
		t.Fatal(err)
	}
	nextVoucher++
	return v.WithID(nextVoucher)
}

var nextOrder int64 = 1

func orderFor(t testing.TB, u domain.UserID, v domain.VoucherID) domain.VoucherOrder {
	t.Helper()
	nextOrder++
	id, err := domain.NewOrderID(time.Now(), uint32(nextOrder))
	if err != nil {
		t.Fatal(err)
	}
	o, err := domain.NewVoucherOrder(id, u, v)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// userIn returns the first user id from start on whose home is bucket b.
func userIn(b, k int, start domain.UserID) domain.UserID {
	for u := start; ; u++ {
		if redisschema.HomeBucket(u, k) == b {
			return u
		}
	}
}

// splitInto is v split into k buckets (k = 1: v as it is).
func splitInto(t testing.TB, v domain.Voucher, k int) domain.Voucher {
	t.Helper()
	if k == 1 {
		return v
	}
	s, err := v.Sale().WithBuckets(k)
	if err != nil {
		t.Fatal(err)
	}
	return v.WithSale(s)
}

func fastOpts(prefix string) redisgate.Options {
	return redisgate.Options{Prefix: prefix, ApplyDeadline: 150 * time.Millisecond, Skew: 50 * time.Millisecond}
}

// clusterGate is a gate with fastOpts on the test cluster, under a key
// prefix of its own that is dropped when the test ends.
func clusterGate(t *testing.T) (*redisgate.Gate, *redis.ClusterClient, string) {
	t.Helper()
	rdb := testenv.RedisCluster(t)
	prefix := testenv.KeyPrefix(t)
	t.Cleanup(func() { testenv.DropPrefix(t, rdb, prefix) })
	return redisgate.New(rdb, fastOpts(prefix)), rdb, prefix
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// books asserts what Redis holds for the voucher: the total units (bucket
// stock plus unapplied records), and that no record is left.
func books(t *testing.T, g *redisgate.Gate, id domain.VoucherID, wantUnits int) {
	t.Helper()
	units, found, err := g.Stock(ctx(t), id)
	if err != nil || !found {
		t.Fatalf("stock: %v found=%v", err, found)
	}
	if units != wantUnits {
		t.Fatalf("units in Redis = %d, want %d", units, wantUnits)
	}
}

// sellOut claims with fresh users until sold out and returns how many sold.
func sellOut(t *testing.T, g *redisgate.Gate, id domain.VoucherID, firstUser domain.UserID) int {
	t.Helper()
	sold, soldOut := 0, 0
	for u := firstUser; soldOut < 10; u++ {
		err := g.ReserveAndAppend(ctx(t), orderFor(t, u, id))
		switch {
		case err == nil:
			sold++
			soldOut = 0
		case errors.Is(err, domain.ErrSoldOut):
			soldOut++
		default:
			t.Fatalf("claim of user %d: %v", u, err)
		}
	}
	return sold
}

func TestPreheatPutsBucketsOnDifferentMasters(t *testing.T) {
	g, rdb, _ := clusterGate(t)
	v := newVoucher(t, 10)
	if err := g.Preheat(ctx(t), splitInto(t, v, 3)); err != nil {
		t.Fatal(err)
	}
	stocks, err := g.Stocks(ctx(t), v.ID())
	if err != nil {
		t.Fatal(err)
	}
	if stocks[0]+stocks[1]+stocks[2] != 10 || stocks[0] != 4 || stocks[2] != 3 {
		t.Fatalf("stocks %v, want 4,3,3", stocks)
	}
	masters := map[string]bool{}
	for b := range 3 {
		m, err := rdb.MasterForKey(ctx(t), "{"+redisschema.BucketTag(v.ID(), b, 3)+"}")
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Fatalf("3 buckets on %d masters", len(masters))
	}
	// A second Preheat (an admin's retry) after a sale must not refill.
	if err := g.ReserveAndAppend(ctx(t), orderFor(t, 1, v.ID())); err != nil {
		t.Fatal(err)
	}
	if err := g.Preheat(ctx(t), splitInto(t, v, 3)); err != nil {
		t.Fatal(err)
	}
	books(t, g, v.ID(), 9)
	if err := g.Preheat(ctx(t), splitInto(t, v, 2)); err == nil {
		t.Fatal("preheat with another K accepted")
	}
}

func TestClaimMovesStockAndAnswersSoldOutOnlyWhenEveryBucketIsEmpty(t *testing.T) {
	g, _, _ := clusterGate(t)
	v := newVoucher(t, 5)
	if err := g.Preheat(ctx(t), splitInto(t, v, 3)); err != nil {
		t.Fatal(err)
	}
	// Every unit is bought by users whose home is bucket 2 (stock 1): four
	// of them need a transfer.
	u := domain.UserID(1)
	for i := range 5 {
		u = userIn(2, 3, u+1)
		if err := g.ReserveAndAppend(ctx(t), orderFor(t, u, v.ID())); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if err := g.ReserveAndAppend(ctx(t), orderFor(t, u, v.ID())); !errors.Is(err, domain.ErrAlreadyClaimed) {
			t.Fatalf("second claim of user %d: %v", u, err)
		}
	}
	for b := range 3 {
		if err := g.ReserveAndAppend(ctx(t), orderFor(t, userIn(b, 3, u+1), v.ID())); !errors.Is(err, domain.ErrSoldOut) {
			t.Fatalf("claim in bucket %d after the last unit: %v", b, err)
		}
	}
	books(t, g, v.ID(), 0)
	if n, _ := g.PendingTransfers(ctx(t), v.ID()); n != 0 {
		t.Fatalf("%d transfer records left", n)
	}
	if n, _ := g.Pending(ctx(t), v.ID()); n != 5 {
		t.Fatalf("%d orders in the streams, want 5", n)
	}
}

// A process killed between the steps of a transfer: the units it took are
// counted in its record; the repair finishes the record and the sale ends
// with exactly the stock sold.
func TestProcessKilledBetweenTransferSteps(t *testing.T) {
	rdb := testenv.RedisCluster(t)
	for _, step := range []string{"taken", "applied"} {
		t.Run(step, func(t *testing.T) {
			prefix := testenv.KeyPrefix(t)
			t.Cleanup(func() { testenv.DropPrefix(t, rdb, prefix) })
			opts := fastOpts(prefix)
			opts.Fault = func(s string) error {
				if s == step {
					return errors.New("killed after " + s)
				}
				return nil
			}
			dying := redisgate.New(rdb, opts)
			v := newVoucher(t, 8)
			if err := dying.Preheat(ctx(t), splitInto(t, v, 3)); err != nil { // 3,3,2
				t.Fatal(err)
			}
			// Empty bucket 2 honestly, then die in the transfer.
			u := domain.UserID(100)
			healthy := redisgate.New(rdb, fastOpts(prefix))
			for range 2 {
				u = userIn(2, 3, u+1)
				if err := healthy.ReserveAndAppend(ctx(t), orderFor(t, u, v.ID())); err != nil {
					t.Fatal(err)
				}
			}
			u = userIn(2, 3, u+1)
			err := dying.ReserveAndAppend(ctx(t), orderFor(t, u, v.ID()))
			if !errors.Is(err, ports.ErrNotAdmitted) {
				t.Fatalf("dying claim: %v", err)
			}
			if n, _ := healthy.PendingTransfers(ctx(t), v.ID()); n != 1 {
				t.Fatalf("%d records after the kill, want 1", n)
			}
			books(t, healthy, v.ID(), 6) // a record's units count until applied, and only once
			// The repair leaves a young record to its claimant, then finishes it.
			testenv.Eventually(t, 10*time.Second, func() (bool, string) {
				n, err := healthy.RepairTransfers(ctx(t), v.ID())
				return err == nil && n == 1, "repair"
			})
			if n, _ := healthy.PendingTransfers(ctx(t), v.ID()); n != 0 {
				t.Fatalf("%d records after the repair", n)
			}
			books(t, healthy, v.ID(), 6)
			if sold := sellOut(t, healthy, v.ID(), 10_000); sold != 6 {
				t.Fatalf("sold %d after the repair, want 6", sold)
			}
			books(t, healthy, v.ID(), 0)
			if n, _ := healthy.Pending(ctx(t), v.ID()); n != 8 {
				t.Fatalf("%d orders queued, want the stock 8", n)
			}
		})
	}
}

func delBucket(t *testing.T, rdb redis.UniversalClient, prefix string, id domain.VoucherID, b, k int) {
	t.Helper()
	bk := redisschema.KeysForTag(prefix, redisschema.BucketTag(id, b, k))
	for _, key := range []string{bk.Voucher, bk.Buyers, bk.Orders, bk.Transfers(), bk.Applied()} {
		if err := rdb.Del(ctx(t), key).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// A bucket's master loses its data (its stock, marks, stream and records):
// the restore rebuilds it from the database's numbers so that units in Redis
// plus orders queued equal the database's remaining stock, and the sale then
// sells exactly that.
func TestBucketLostThenRestored(t *testing.T) {
	g, rdb, prefix := clusterGate(t)
	v := newVoucher(t, 30)
	if err := g.Preheat(ctx(t), splitInto(t, v, 3)); err != nil {
		t.Fatal(err)
	}
	var buyers []domain.VoucherOrder
	for u := domain.UserID(1); len(buyers) < 12; u++ {
		o := orderFor(t, u, v.ID())
		if err := g.ReserveAndAppend(ctx(t), o); err != nil {
			t.Fatal(err)
		}
		buyers = append(buyers, o)
	}
	// A transfer left half done by a dead claimant, into the bucket lost
	// next: bucket 1 is emptied, then a claimant dies after taking from
	// bucket 2. (Nothing has reached the database: its stock is still 30.)
	u := domain.UserID(5000)
	for {
		stocks, _ := g.Stocks(ctx(t), v.ID())
		if stocks[1] == 0 {
			break
		}
		u = userIn(1, 3, u+1)
		o := orderFor(t, u, v.ID())
		if err := g.ReserveAndAppend(ctx(t), o); err != nil {
			t.Fatal(err)
		}
		buyers = append(buyers, o)
	}
	dyingOpts := fastOpts(prefix)
	dyingOpts.Fault = func(string) error { return errors.New("killed") }
	u = userIn(1, 3, u+1)
	if err := redisgate.New(rdb, dyingOpts).ReserveAndAppend(ctx(t), orderFor(t, u, v.ID())); !errors.Is(err, ports.ErrNotAdmitted) {
		t.Fatalf("dying claim: %v", err)
	}
	if n, _ := g.PendingTransfers(ctx(t), v.ID()); n != 1 {
		t.Fatalf("%d records, want 1", n)
	}
	delBucket(t, rdb, prefix, v.ID(), 1, 3)
	missing, err := g.Missing(ctx(t), []domain.VoucherID{v.ID()})
	if err != nil || len(missing) != 1 {
		t.Fatalf("missing = %v, %v", missing, err)
	}
	queued, _ := g.Pending(ctx(t), v.ID()) // bucket 1's queued orders are lost with it
	ok, err := g.Restore(ctx(t), splitInto(t, v, 3), nil)
	if err != nil || !ok {
		t.Fatalf("restore: %v, %v", ok, err)
	}
	if missing, _ := g.Missing(ctx(t), []domain.VoucherID{v.ID()}); len(missing) != 0 {
		t.Fatal("still missing after the restore")
	}
	books(t, g, v.ID(), 30-int(queued))
	// Survivors keep their marks: their users are still refused a second order.
	marks, _ := g.Buyers(ctx(t), v.ID())
	for _, o := range buyers {
		if redisschema.HomeBucket(o.UserID(), 3) == 1 {
			continue
		}
		if marks[o.ID()] != o.UserID() {
			t.Fatalf("user %d lost its mark", o.UserID())
		}
		if err := g.ReserveAndAppend(ctx(t), orderFor(t, o.UserID(), v.ID())); !errors.Is(err, domain.ErrAlreadyClaimed) {
			t.Fatalf("user %d claimed again: %v", o.UserID(), err)
		}
	}
	if sold := sellOut(t, g, v.ID(), 10_000); sold != 30-int(queued) {
		t.Fatalf("sold %d after the restore, want %d", sold, 30-queued)
	}
	books(t, g, v.ID(), 0)
	if n, _ := g.Pending(ctx(t), v.ID()); n != 30 {
		t.Fatalf("%d orders queued, want 30", n)
	}
}

// An admin added units; the database committed them but the gate never took
// them (the control's Redis step failed), and then one bucket was lost. The
// restore rebuilds that bucket from the database's stock, which holds the
// added units: the repair's Apply that follows must add none again.
func TestBucketRestoredAfterAnAdditionTheGateMissedTakesItOnce(t *testing.T) {
	g, _, _, v, stored := aBucketLostAfterAMissedAddition(t)
	if ok, err := g.Restore(ctx(t), stored, nil); err != nil || !ok {
		t.Fatalf("restore: %v, %v", ok, err)
	}
	if err := g.Apply(ctx(t), stored); err != nil {
		t.Fatal(err)
	}
	books(t, g, v.ID(), 36)
	if sold := sellOut(t, g, v.ID(), 1); sold != 36 {
		t.Fatalf("sold %d, want the database's 36", sold)
	}
}

// aBucketLostAfterAMissedAddition: a sale of 30 units in 3 buckets (v, on
// the cluster) whose admin added 6 that the database committed and the gate
// never took (stored: the database's 36), then bucket 2 lost.
func aBucketLostAfterAMissedAddition(t *testing.T) (*redisgate.Gate, *redis.ClusterClient, string, domain.Voucher, domain.Voucher) {
	t.Helper()
	g, rdb, prefix := clusterGate(t)
	v := newVoucher(t, 30)
	if err := g.Preheat(ctx(t), splitInto(t, v, 3)); err != nil {
		t.Fatal(err)
	}
	more, err := v.Sale().AddStock(6, testenv.Now())
	if err != nil {
		t.Fatal(err)
	}
	delBucket(t, rdb, prefix, v.ID(), 2, 3)
	return g, rdb, prefix, v, splitInto(t, v.WithSale(more), 3)
}

// Redis loses the whole voucher; the database has 8 orders and 22 units
// left. The restore writes every bucket: the units split, each buyer's mark
// in its home bucket.
func TestRestoreFromDatabaseWithBuckets(t *testing.T) {
	g, _, _ := clusterGate(t)
	v := newVoucher(t, 22)
	var buyers []domain.VoucherOrder
	for u := domain.UserID(1); u <= 8; u++ {
		buyers = append(buyers, orderFor(t, u, v.ID()))
	}
	ok, err := g.Restore(ctx(t), splitInto(t, v, 3), buyers)
	if err != nil || !ok {
		t.Fatalf("restore: %v, %v", ok, err)
	}
	books(t, g, v.ID(), 22)
	stocks, _ := g.Stocks(ctx(t), v.ID())
	for b, s := range stocks {
		if s < 7 || s > 8 {
			t.Fatalf("bucket %d holds %d of 22: %v", b, s, stocks)
		}
	}
	for _, o := range buyers {
		if err := g.ReserveAndAppend(ctx(t), orderFor(t, o.UserID(), v.ID())); !errors.Is(err, domain.ErrAlreadyClaimed) {
			t.Fatalf("buyer %d claimed again: %v", o.UserID(), err)
		}
		found, ok, err := g.Queued(ctx(t), o.UserID(), o.ID())
		_ = found
		if err != nil || ok {
			t.Fatalf("a restored buyer is found in the database, not queued: %v %v", ok, err)
		}
	}
	// A second restore finds every bucket serving and writes nothing.
	if ok, err := g.Restore(ctx(t), splitInto(t, v, 3), buyers); err != nil || ok {
		t.Fatalf("second restore: %v, %v", ok, err)
	}
	if sold := sellOut(t, g, v.ID(), 1000); sold != 22 {
		t.Fatalf("sold %d, want 22", sold)
	}
}

// The fence: a claimant took units from a bucket that is then lost (with its
// record) and applies them only after the restore rebuilt the buckets. The
// apply must be refused, or those units would exist twice (once in the
// restored count, once in the home's stock).
func TestRestoreFencesOffAClaimThatTookFromTheLostBucket(t *testing.T) {
	g, rdb, prefix := clusterGate(t)
	v := newVoucher(t, 12)
	if err := g.Preheat(ctx(t), splitInto(t, v, 3)); err != nil { // 4,4,4
		t.Fatal(err)
	}
	u := domain.UserID(1)
	for range 4 {
		u = userIn(0, 3, u+1)
		if err := g.ReserveAndAppend(ctx(t), orderFor(t, u, v.ID())); err != nil {
			t.Fatal(err)
		}
	}
	taken, resume := make(chan struct{}), make(chan struct{})
	opts := fastOpts(prefix)
	first := true
	opts.Fault = func(step string) error {
		if step == "taken" && first {
			first = false
			close(taken)
			<-resume
		}
		return nil
	}
	slow := redisgate.New(rdb, opts)
	done := make(chan error, 1)
	u = userIn(0, 3, u+1)
	go func() { done <- slow.ReserveAndAppend(context.Background(), orderFor(t, u, v.ID())) }()
	<-taken                                 // the claimant holds 2 units taken from bucket 1
	delBucket(t, rdb, prefix, v.ID(), 1, 3) // bucket 1 lost, its record with it
	if ok, err := g.Restore(ctx(t), splitInto(t, v, 3), nil); err != nil || !ok {
		t.Fatalf("restore: %v %v", ok, err)
	}
	close(resume)
	if err := <-done; err != nil && !errors.Is(err, ports.ErrNotAdmitted) {
		t.Fatalf("the fenced claim: %v", err)
	}
	queued, _ := g.Pending(ctx(t), v.ID())
	units, _, _ := g.Stock(ctx(t), v.ID())
	if units+int(queued) != 12 {
		t.Fatalf("units %d + queued %d != 12: the late apply counted twice or a unit was lost", units, queued)
	}
	sold := sellOut(t, g, v.ID(), 10_000)
	if after, _ := g.Pending(ctx(t), v.ID()); after != 12 || int(after-queued) != sold {
		t.Fatalf("queued %d after selling %d more, want 12", after, sold)
	}
}

// The K key lives in the voucher's own slot, apart from the buckets: lost
// alone, the probe reports the voucher, and the restore (K from MySQL) writes
// it again without touching the buckets, so a process that never cached K
// routes the claims to the buckets again.
func TestLostBucketCountIsRestored(t *testing.T) {
	g, rdb, prefix := clusterGate(t)
	v := newVoucher(t, 6)
	if err := g.Preheat(ctx(t), splitInto(t, v, 3)); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx(t), redisschema.BucketMeta(prefix, v.ID())).Err(); err != nil {
		t.Fatal(err)
	}
	split := splitInto(t, v, 3)
	fresh := redisgate.New(rdb, fastOpts(prefix))       // a process that never saw K
	for _, probe := range []*redisgate.Gate{g, fresh} { // whether it knows K or not
		missing, err := probe.Missing(ctx(t), []domain.VoucherID{v.ID()})
		if err != nil || len(missing) != 1 {
			t.Fatalf("missing %v, %v", missing, err)
		}
	}
	if ok, err := fresh.Restore(ctx(t), split, nil); err != nil || ok {
		t.Fatalf("restore: %v %v (the buckets were all there)", ok, err)
	}
	if k, err := fresh.Buckets(ctx(t), v.ID()); err != nil || k != 3 {
		t.Fatalf("K after the restore: %d, %v", k, err)
	}
	books(t, fresh, v.ID(), 6)
}

// Status queries find a queued order of a split voucher in its home bucket
// and one of an unsplit voucher where redisgate put it, through one lookup,
// and nobody else's.
func TestQueuedFindsOrdersOfBothKinds(t *testing.T) {
	r, _, _ := clusterGate(t)

	sv, wv := newVoucher(t, 9), newVoucher(t, 9)
	sv = splitInto(t, sv, 3)
	for _, v := range []domain.Voucher{sv, wv} {
		if err := r.Preheat(ctx(t), v); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []domain.Voucher{sv, wv} {
		for u := domain.UserID(1); u <= 4; u++ {
			o := orderFor(t, u, v.ID())
			if err := r.ReserveAndAppend(ctx(t), o); err != nil {
				t.Fatalf("voucher %d user %d: %v", v.ID(), u, err)
			}
			got, ok, err := r.Queued(ctx(t), u, o.ID())
			if err != nil || !ok || got != o {
				t.Fatalf("queued %s: %v %v %v", o, got, ok, err)
			}
			if _, ok, err := r.Queued(ctx(t), u+100, o.ID()); err != nil || ok {
				t.Fatalf("another user found %s: %v %v", o, ok, err)
			}
		}
	}
	if n, _ := r.Pending(ctx(t), sv.ID()); n != 4 {
		t.Fatalf("split voucher's streams hold %d, want 4", n)
	}
	if s, _, _ := r.Stock(ctx(t), wv.ID()); s != 5 {
		t.Fatalf("unsplit voucher's stock %d, want 5", s)
	}
}

// A gate lost while its orders wait in the stream (its hashes evicted or
// deleted, its streams kept) is rebuilt with their units left out and their
// buyers' places kept: each buyer is refused a second order, in both layouts.
func TestRebuildKeepsThePlacesOfQueuedBuyers(t *testing.T) {
	for _, k := range []int{1, 3} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			g, rdb, prefix := clusterGate(t)
			v := splitInto(t, newVoucher(t, 30), k)
			if err := g.Preheat(ctx(t), v); err != nil {
				t.Fatal(err)
			}
			var queued []domain.VoucherOrder
			for u := domain.UserID(1); u <= 9; u++ {
				o := orderFor(t, u, v.ID())
				if err := g.ReserveAndAppend(ctx(t), o); err != nil {
					t.Fatal(err)
				}
				queued = append(queued, o)
			}
			for b := range k {
				bk := redisschema.KeysForTag(prefix, redisschema.BucketTag(v.ID(), b, k))
				if err := rdb.Del(ctx(t), bk.Voucher, bk.Buyers).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if ok, err := g.Restore(ctx(t), v, nil); err != nil || !ok {
				t.Fatalf("restore: %v, %v", ok, err)
			}
			books(t, g, v.ID(), 30-len(queued))
			marks, _ := g.Buyers(ctx(t), v.ID())
			for _, o := range queued {
				if marks[o.ID()] != o.UserID() {
					t.Fatalf("user %d, whose order %d is queued, holds no place: marks %v", o.UserID(), o.ID(), marks)
				}
				if err := g.ReserveAndAppend(ctx(t), orderFor(t, o.UserID(), v.ID())); !errors.Is(err, domain.ErrAlreadyClaimed) {
					t.Fatalf("user %d claimed again: %v", o.UserID(), err)
				}
			}
		})
	}
}

// A claim whose reply was lost is resent (go-redis resends a command whose
// connection broke). If a restore froze the buckets in between, the resend
// finds its own mark in a kept bucket: it was taken, and answers taken, not
// busy (which says nothing changed, and would hand its order ID back for
// another order to reuse). A new claim is still told busy.
func TestAClaimResentToAFrozenBucketIsTaken(t *testing.T) {
	onEveryRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		g, v := redisgate.New(rdb, fastOpts(prefix)), splitSale(t, rdb, prefix, 9)
		taken := orderFor(t, userIn(1, 3, 1), v.ID())
		if err := g.ReserveAndAppend(ctx(t), taken); err != nil {
			t.Fatal(err)
		}
		for b := range 3 {
			setFrozen(t, rdb, prefix, v.ID(), b, true)
		}
		if err := g.ReserveAndAppend(ctx(t), taken); err != nil {
			t.Fatalf("claim resent to a frozen bucket: %v, want taken", err)
		}
		other := orderFor(t, userIn(1, 3, taken.UserID()+1), v.ID())
		if err := g.ReserveAndAppend(ctx(t), other); !errors.Is(err, ports.ErrNotAdmitted) {
			t.Fatalf("new claim to a frozen bucket: %v, want busy (not admitted)", err)
		}
		if n, _ := g.Pending(ctx(t), v.ID()); n != 1 {
			t.Fatalf("%d orders queued, want the one taken once", n)
		}
	})
}

// dbAt is the database as a restore reads it: the voucher with its stock
// now, its buyers, and the cancelled orders the gate has not taken back.
type dbAt struct {
	ports.VoucherRepository
	ports.OrderRepository
	v          domain.Voucher
	buyers     []domain.VoucherOrder
	unreturned []domain.VoucherOrder
}

func (d dbAt) Get(context.Context, domain.VoucherID) (domain.Voucher, error) { return d.v, nil }
func (d dbAt) Buyers(context.Context, domain.VoucherID) ([]domain.VoucherOrder, error) {
	return d.buyers, nil
}
func (d dbAt) Unreturned(context.Context, int) ([]domain.VoucherOrder, error) {
	return d.unreturned, nil
}

// A bucket is lost while an order whose home is a kept bucket is cancelled
// in the database and not yet given back to the gate (the returner runs
// after the cancellation commits, and fails while Redis is down). The
// database's stock holds its unit; the kept bucket holds its buyer's mark.
// The restore gives that unit back itself, so the returner's Return that
// follows gives nothing more: the units in Redis are the database's stock,
// not one more (which the gate would sell and the database refuse).
func TestRestoreGivesBackTheUnitsOfCancelledOrdersOnce(t *testing.T) {
	onEveryRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		v := splitSale(t, rdb, prefix, 30)
		// Six orders, two a bucket, written to the database and acked.
		var created []domain.VoucherOrder
		for b := range 3 {
			for _, u := range []domain.UserID{userIn(b, 3, 100), userIn(b, 3, userIn(b, 3, 100)+1)} {
				created = append(created, orderFor(t, u, v.ID()))
			}
		}
		for _, o := range created {
			if err := redisgate.New(rdb, fastOpts(prefix)).ReserveAndAppend(ctx(t), o); err != nil {
				t.Fatal(err)
			}
		}
		for b := range 3 {
			bk := redisschema.KeysForTag(prefix, redisschema.BucketTag(v.ID(), b, 3))
			if err := rdb.Del(ctx(t), bk.Orders).Err(); err != nil {
				t.Fatal(err)
			}
		}
		cancelled := created[0] // home bucket 0, which is kept
		buyers := append([]domain.VoucherOrder{cancelled.Forfeited()}, created[1:]...)
		stock := 30 - len(created) + 1
		sale, err := domain.NewSale(stock, v.Sale().Begin(), v.Sale().End())
		if err == nil {
			sale, err = sale.WithBuckets(3)
		}
		if err != nil {
			t.Fatal(err)
		}
		db := dbAt{v: v.WithSale(sale), buyers: buyers, unreturned: []domain.VoucherOrder{cancelled}}
		opts := fastOpts(prefix)
		opts.Vouchers, opts.Orders, opts.Unreturned = db, db, db.Unreturned
		g := redisgate.New(rdb, opts)
		delBucket(t, rdb, prefix, v.ID(), 1, 3)
		if ok, err := g.Restore(ctx(t), v, nil); err != nil || !ok {
			t.Fatalf("restore: %v, %v", ok, err)
		}
		if err := g.Return(ctx(t), []domain.VoucherOrder{cancelled}); err != nil { // the returner, late
			t.Fatal(err)
		}
		books(t, g, v.ID(), stock)
	})
}

// A bucket a restore has frozen gives nothing back to the returner: the
// restore counts its stock while frozen and gives back itself the units the
// database had cancelled, so a return landing in between would count one
// twice. The return fails (its orders stay unreturned for the next pass)
// and changes nothing; once the bucket serves again it goes through. The
// same for the release of an order the database refused: the restore counts
// the bucket's stock, then its stream, and a release acked in between would
// be in neither count and back in the bucket.
func TestAFrozenBucketGivesNothingBackUntilTheRestoreIsDone(t *testing.T) {
	onEveryRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		g, v := redisgate.New(rdb, fastOpts(prefix)), splitSale(t, rdb, prefix, 9)
		o := orderFor(t, userIn(2, 3, 1), v.ID())
		if err := g.ReserveAndAppend(ctx(t), o); err != nil {
			t.Fatal(err)
		}
		setFrozen(t, rdb, prefix, v.ID(), 2, true)
		if err := g.Return(ctx(t), []domain.VoucherOrder{o}); err == nil {
			t.Fatal("a return into a frozen bucket succeeded")
		}
		if err := g.Release(ctx(t), o, true); err == nil {
			t.Fatal("a release in a frozen bucket succeeded")
		}
		books(t, g, v.ID(), 8)
		setFrozen(t, rdb, prefix, v.ID(), 2, false)
		if err := g.Return(ctx(t), []domain.VoucherOrder{o}); err != nil {
			t.Fatal(err)
		}
		books(t, g, v.ID(), 9)
	})
}

// An admin adds units while a restore has the buckets frozen. The restore
// counts the kept buckets' stock while frozen and writes the units of the
// database it reads after, so units the control added to a frozen bucket
// in between would be on sale twice: the frozen bucket takes the control's
// pause but no units (the answer says so, for the admin to retry, or the
// repair to apply), and once it serves again the units are added once.
func TestAFrozenBucketTakesNoUnitsAdded(t *testing.T) {
	onEveryRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		g, v := redisgate.New(rdb, fastOpts(prefix)), splitSale(t, rdb, prefix, 9)
		now := testenv.WallClock{}.Now()
		sale, err := v.Sale().AddStock(5, now)
		if err == nil {
			sale, err = sale.WithPause(true, now)
		}
		if err != nil {
			t.Fatal(err)
		}
		setFrozen(t, rdb, prefix, v.ID(), 0, true)
		if err := g.Apply(ctx(t), v.WithSale(sale)); err == nil {
			t.Fatal("units added to a frozen bucket: Apply answered nil")
		}
		books(t, g, v.ID(), 9)
		for b := range 3 {
			bk := redisschema.KeysForTag(prefix, redisschema.BucketTag(v.ID(), b, 3))
			if p, _ := rdb.HGet(ctx(t), bk.Voucher, "paused").Result(); p != "1" {
				t.Fatalf("bucket %d not paused (%q)", b, p)
			}
		}
		setFrozen(t, rdb, prefix, v.ID(), 0, false)
		for range 2 {
			if err := g.Apply(ctx(t), v.WithSale(sale)); err != nil {
				t.Fatal(err)
			}
		}
		books(t, g, v.ID(), 14)
	})
}

// As TestBucketRestoredAfterAnAdditionTheGateMissedTakesItOnce, but the
// restore dies after writing the lost bucket, before it unfreezes them: the
// next restore finds no placeholder and only unfreezes. Bucket 0 must count
// the added units taken by then, or the repair's Apply that follows adds
// them a second time (the pool already held them).
func TestRestoreKilledAfterItsWritesAddsNoUnitTwice(t *testing.T) {
	g, rdb, prefix, v, stored := aBucketLostAfterAMissedAddition(t)
	dying := fastOpts(prefix)
	dying.Fault = func(step string) error {
		if step == "written" {
			return errors.New("killed")
		}
		return nil
	}
	if _, err := redisgate.New(rdb, dying).Restore(ctx(t), stored, nil); err == nil {
		t.Fatal("the dying restore answered success")
	}
	if missing, _ := g.Missing(ctx(t), []domain.VoucherID{v.ID()}); len(missing) != 1 {
		t.Fatal("buckets left frozen are not reported missing")
	}
	if _, err := g.Restore(ctx(t), stored, nil); err != nil {
		t.Fatalf("restore after the dead one: %v", err)
	}
	if err := g.Apply(ctx(t), stored); err != nil {
		t.Fatal(err)
	}
	books(t, g, v.ID(), 36)
}

// Orders is what reconcile reads of a voucher's streams (the QueueBacklog
// port): bucket by bucket, each oldest first and a page at a time, at most max
// entries in all, and complete only when nothing follows them. An entry that
// carries no order counts toward max and gives none.
func TestOrdersReadsTheStreamsInPagesUpToMax(t *testing.T) {
	onEveryRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		g := redisgate.New(rdb, fastOpts(prefix))
		if got, complete, err := g.Orders(ctx(t), newVoucher(t, 1).ID(), 100); err != nil || !complete || len(got) != 0 {
			t.Fatalf("Orders of a voucher without a stream = %v, complete %v, %v", got, complete, err)
		}
		for _, c := range []struct {
			k         int
			perBucket []int // entries per bucket, more than one page in the first
		}{{1, []int{1005}}, {3, []int{1001, 0, 3}}} {
			t.Run(fmt.Sprintf("k=%d", c.k), func(t *testing.T) {
				v := splitInto(t, newVoucher(t, 10), c.k)
				if err := g.Preheat(ctx(t), v); err != nil {
					t.Fatal(err)
				}
				var entries []*domain.VoucherOrder // in the order Orders reads them; nil: no order
				for bk, n := range c.perBucket {
					stream := redisschema.KeysForTag(prefix, redisschema.BucketTag(v.ID(), bk, c.k)).Orders
					pipe := rdb.Pipeline()
					for i := range n {
						values := []any{"id", "x"} // poison, second in its stream
						if i != 1 {
							o := orderFor(t, domain.UserID(bk*10_000+i+1), v.ID())
							entries = append(entries, &o)
							values = redisschema.EncodeOrder(o)
						} else {
							entries = append(entries, nil)
						}
						pipe.XAdd(ctx(t), &redis.XAddArgs{Stream: stream, Values: values})
					}
					if _, err := pipe.Exec(ctx(t)); err != nil {
						t.Fatal(err)
					}
				}
				total := len(entries)
				for _, max := range []int{total + 1000, total, total - 1, 1002, 2, 0} {
					var want []domain.VoucherOrder
					for _, o := range entries[:min(max, total)] {
						if o != nil {
							want = append(want, *o)
						}
					}
					got, complete, err := g.Orders(ctx(t), v.ID(), max)
					if err != nil || complete != (max >= total) || !slices.Equal(got, want) {
						t.Fatalf("Orders(max %d of %d entries) = %d orders, complete %v, %v; want the first %d in order, complete %v",
							max, total, len(got), complete, err, len(want), max >= total)
					}
				}
			})
		}
	})
}

// onEveryRedis runs f on each Redis the suites run on, under a key prefix of
// its own that is dropped when the test ends.
func onEveryRedis(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, prefix string)) {
	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			prefix := testenv.KeyPrefix(t)
			t.Cleanup(func() { testenv.DropPrefix(t, rdb, prefix) })
			f(t, rdb, prefix)
		})
	}
}

// splitSale is a voucher of stock units split into 3 buckets, preheated.
func splitSale(t *testing.T, rdb redis.UniversalClient, prefix string, stock int) domain.Voucher {
	t.Helper()
	v := splitInto(t, newVoucher(t, stock), 3)
	if err := redisgate.New(rdb, fastOpts(prefix)).Preheat(ctx(t), v); err != nil {
		t.Fatal(err)
	}
	return v
}

// setFrozen freezes bucket b of a voucher split into 3 as freeze.lua does to
// a bucket that exists (on), or unfreezes it as the restore's end does.
func setFrozen(t *testing.T, rdb redis.UniversalClient, prefix string, id domain.VoucherID, b int, on bool) {
	t.Helper()
	bk := redisschema.KeysForTag(prefix, redisschema.BucketTag(id, b, 3))
	var err error
	if on {
		err = rdb.HSet(ctx(t), bk.Voucher, "frozen", "1").Err()
	} else {
		err = rdb.HDel(ctx(t), bk.Voucher, "frozen").Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}
