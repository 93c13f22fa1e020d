package redisgate_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/adapters/redisstream"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// nodeStats is what INFO says of one master: commands served and CPU seconds.
type nodeStats struct {
	calls int64
	cpu   float64
	// scriptUsec is the time Redis spent in EVALSHA/EVAL (commandstats usec).
	scriptUsec int64
}

func masterStats(t testing.TB, rdb *redis.ClusterClient) map[string]nodeStats {
	t.Helper()
	var mu sync.Mutex
	out := map[string]nodeStats{}
	err := rdb.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats", "cpu").Result()
		if err != nil {
			return err
		}
		var s nodeStats
		for _, line := range strings.Split(info, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "cmdstat_") {
				_, rest, _ := strings.Cut(line, "calls=")
				n, _, _ := strings.Cut(rest, ",")
				x, _ := strconv.ParseInt(n, 10, 64)
				s.calls += x
				if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
					_, rest, _ := strings.Cut(line, "usec=")
					n, _, _ := strings.Cut(rest, ",")
					u, _ := strconv.ParseInt(n, 10, 64)
					s.scriptUsec += u
				}
			}
			for _, f := range []string{"used_cpu_user:", "used_cpu_sys:"} {
				if strings.HasPrefix(line, f) {
					x, _ := strconv.ParseFloat(strings.TrimPrefix(line, f), 64)
					s.cpu += x
				}
			}
		}
		mu.Lock()
		out[c.Options().Addr] = s
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type answer struct {
	user       domain.UserID
	order      domain.OrderID
	err        error
	start, end time.Time
}

// TestStampedeOnOneBucketedVoucher is issue 12's proof on the local 3-master
// cluster: 3,000 units in 3 buckets, 10,000 users each sending 2 claims at
// once (in-process, through the bucketed admission, whose answer is the
// client's), then the stream consumer drains every bucket's stream into
// MySQL through the guarded batch writer.
func TestStampedeOnOneBucketedVoucher(t *testing.T) {
	if testing.Short() {
		t.Skip("stampede: not in -short")
	}
	rdb := testenv.RedisCluster(t)
	db, err := mysqlstore.OpenMySQL(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := mysqlstore.Migrate(ctx(t), db); err != nil {
		t.Fatal(err)
	}
	vouchers, orders := mysqlstore.NewVoucherRepo(db), mysqlstore.NewOrderRepo(db)
	const stock, users, k = 3000, 10000, 3
	v, err := vouchers.AddSeckill(ctx(t), newVoucher(t, stock).WithID(0))
	if err != nil {
		t.Fatal(err)
	}
	prefix := testenv.KeyPrefix(t)
	t.Cleanup(func() { testenv.DropPrefix(t, rdb, prefix) })
	g := redisgate.New(rdb, redisgate.Options{Prefix: prefix, Vouchers: vouchers, Orders: orders})
	if err := g.Preheat(ctx(t), splitInto(t, v, k)); err != nil {
		t.Fatal(err)
	}

	var seq atomic.Uint32
	answers := make([]answer, 2*users)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := domain.UserID(i/2 + 1)
			id, err := domain.NewOrderID(time.Now(), seq.Add(1))
			if err != nil {
				panic(err)
			}
			o, _ := domain.NewVoucherOrder(id, u, v.ID())
			<-start
			a := answer{user: u, order: id, start: time.Now()}
			// A client told busy (not admitted) tries again, as the HTTP
			// client would; every try is bounded by the claim budget.
			for try := 0; ; try++ {
				a.err = g.ReserveAndAppend(context.Background(), o)
				if !errors.Is(a.err, ports.ErrNotAdmitted) || try == 20 {
					break
				}
			}
			a.end = time.Now()
			answers[i] = a
		}()
	}
	before := masterStats(t, rdb)
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	after := masterStats(t, rdb)

	// Exactly the stock sold, one order per user.
	won := map[domain.UserID]domain.OrderID{}
	var soldOut []answer
	counts := map[string]int{}
	for _, a := range answers {
		switch {
		case a.err == nil:
			counts["ok"]++
			if prev, ok := won[a.user]; ok {
				t.Fatalf("user %d won twice: %d and %d", a.user, prev, a.order)
			}
			won[a.user] = a.order
		case errors.Is(a.err, domain.ErrSoldOut):
			counts["sold_out"]++
			soldOut = append(soldOut, a)
		case errors.Is(a.err, domain.ErrAlreadyClaimed):
			counts["duplicate"]++
		default:
			t.Fatalf("user %d: %v", a.user, a.err)
		}
	}
	t.Logf("answers %v in %s (%.0f claims/s)", counts, elapsed, float64(len(answers))/elapsed.Seconds())
	if len(won) != stock {
		t.Fatalf("%d users won, want exactly the stock %d", len(won), stock)
	}
	stocks, _ := g.Stocks(ctx(t), v.ID())
	for b, s := range stocks {
		if s != 0 {
			t.Fatalf("bucket %d holds %d after the sale: %v", b, s, stocks)
		}
	}
	if n, _ := g.PendingTransfers(ctx(t), v.ID()); n != 0 {
		t.Fatalf("%d transfer records left", n)
	}

	// Sold out only when nothing was left, checked against the buckets'
	// history: each sale's stream entry ID is the Redis time (ms) at which its
	// unit left its bucket, so the last unit was gone at the greatest entry
	// time. A sold-out answer given before that, by more than the stated bound
	// (one snapshot round trip; 5ms here, on loopback), told a user "sold out"
	// while a unit remained.
	var lastSale int64
	for b := range k {
		key := redisschema.KeysForTag(prefix, redisschema.BucketTag(v.ID(), b, k)).Orders
		entries, err := rdb.XRange(ctx(t), key, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			ms, _, _ := strings.Cut(e.ID, "-")
			if x, _ := strconv.ParseInt(ms, 10, 64); x > lastSale {
				lastSale = x
			}
		}
	}
	const bound = 5 // ms
	early, worst := 0, int64(0)
	for _, a := range soldOut {
		if gap := lastSale - a.end.UnixMilli(); gap > 0 {
			early++
			worst = max(worst, gap)
			if gap > bound {
				t.Errorf("user %d was answered sold out at %s, %dms before the last unit was sold",
					a.user, a.end.Format(time.StampMicro), gap)
			}
		}
	}
	t.Logf("sold-out answers: %d, of which %d before the last unit left its bucket (worst %dms early; first sold out %s, last sale %s)",
		len(soldOut), early, worst, firstEnd(soldOut).Format(time.StampMilli), time.UnixMilli(lastSale).Format(time.StampMilli))

	// Load spread: commands per master within ±20% of an even share.
	var total int64
	for addr, s := range after {
		total += s.calls - before[addr].calls
	}
	for addr, s := range after {
		d := s.calls - before[addr].calls
		share := float64(d) / (float64(total) / float64(len(after)))
		t.Logf("master %s: %d commands (%.2f of an even share), %.2fs CPU", addr, d, share, s.cpu-before[addr].cpu)
		if share < 0.8 || share > 1.2 {
			t.Errorf("master %s served %.2f of an even share of the commands", addr, share)
		}
	}

	// Every sold order reaches MySQL exactly once, and the stock there ends 0.
	q, err := redisstream.New(rdb, redisstream.Options{Prefix: prefix, Consumer: "stampede"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	created := 0
	testenv.Eventually(t, 2*time.Minute, func() (bool, string) {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ds, err := q.Receive(rctx, 500)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if len(ds) > 0 {
			batch := make([]domain.VoucherOrder, len(ds))
			for i, d := range ds {
				batch[i] = d.Order
			}
			outs, err := orders.CreateBatch(ctx(t), batch)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range outs {
				if o.State != domain.OrderCreated {
					t.Fatalf("order %v ended %v", o.Order, o.State)
				}
				created++
			}
			if err := q.Ack(ctx(t), ds); err != nil {
				t.Fatal(err)
			}
		}
		return created == stock, strconv.Itoa(created) + " created"
	})
	dbv, err := vouchers.Get(ctx(t), v.ID())
	if err != nil {
		t.Fatal(err)
	}
	if dbv.Sale().Stock() != 0 {
		t.Fatalf("MySQL stock %d after the sale", dbv.Sale().Stock())
	}
	buyers, err := orders.Buyers(ctx(t), v.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(buyers) != stock {
		t.Fatalf("MySQL has %d orders, want %d", len(buyers), stock)
	}
	for _, o := range buyers {
		if won[o.UserID()] != o.ID() {
			t.Fatalf("MySQL order %s was not answered success", o)
		}
	}
	if n, _ := g.Pending(ctx(t), v.ID()); n != 0 {
		t.Fatalf("%d entries left in the bucket streams", n)
	}
}

func firstEnd(as []answer) time.Time {
	var first time.Time
	for _, a := range as {
		if first.IsZero() || a.end.Before(first) {
			first = a.end
		}
	}
	return first
}
