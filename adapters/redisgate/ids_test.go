package redisgate_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// Uniqueness across instances, restarts and midnight is proven in
// test/contract; these tests pin the counter's key, expiry and leasing.

// incrCounter counts INCRBY commands, i.e. leases.
type incrCounter struct{ n atomic.Int64 }

func (c *incrCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *incrCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "incrby" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *incrCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if cmd.Name() == "incrby" {
				c.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

func next(t *testing.T, g *redisgate.IDs) domain.OrderID {
	t.Helper()
	id, err := g.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestIDsUseTheOriginalsDayCounterWithExpiry(t *testing.T) {
	m, rdb := testenv.MiniRedis(t)
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{Clock: testenv.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))})
	next(t, g)
	if got, err := m.Get("icr:order:2025:03:01"); err != nil || got != "1000" {
		t.Fatalf("counter icr:order:2025:03:01 = %q (%v), want one default block leased", got, err)
	}
	if ttl := m.TTL("icr:order:2025:03:01"); ttl != 48*time.Hour {
		t.Fatalf("counter TTL = %s, want 48h", ttl)
	}
}

func TestIDsCostOneRoundTripPerBlock(t *testing.T) {
	m, rdb := testenv.MiniRedis(t)
	var leases incrCounter
	rdb.AddHook(&leases)
	day := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{Block: 3, Clock: testenv.NewClock(day)})
	for want := uint32(1); want <= 10; want++ {
		if id := next(t, g); id.Seq() != want {
			t.Fatalf("id %d has seq %d, want %d", id, id.Seq(), want)
		}
	}
	if n := leases.n.Load(); n != 4 {
		t.Fatalf("10 ids in blocks of 3 took %d leases, want 4", n)
	}
	if got, _ := m.Get("icr:order:2025:03:01"); got != "12" {
		t.Fatalf("counter = %s, want 12", got)
	}
}

func TestIDsDropTheLeaseWhenTheDayChanges(t *testing.T) {
	m, rdb := testenv.MiniRedis(t)
	c := testenv.NewClock(time.Date(2025, 3, 1, 23, 59, 59, 0, time.UTC))
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{Clock: c})
	if id := next(t, g); id.Seq() != 1 {
		t.Fatalf("first id seq %d, want 1", id.Seq())
	}
	c.Set(time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC))
	id := next(t, g)
	if id.Seq() != 1 || !id.Time().Equal(c.Now()) {
		t.Fatalf("first id of the new day: seq %d at %s, want seq 1 from the new day's counter at %s", id.Seq(), id.Time(), c.Now())
	}
	if !m.Exists("icr:order:2025:03:02") {
		t.Fatal("the new day's counter was not used")
	}
}

func TestIDsFailWhenTheDaysSequenceIsExhausted(t *testing.T) {
	m, rdb := testenv.MiniRedis(t)
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{Clock: testenv.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))})
	if err := m.Set("icr:order:2025:03:01", "4294967294"); err != nil { // 2^32-2
		t.Fatal(err)
	}
	if id := next(t, g); id.Seq() != math.MaxUint32 {
		t.Fatalf("seq %d, want the last one, %d", id.Seq(), uint32(math.MaxUint32))
	}
	if _, err := g.Next(context.Background()); !errors.Is(err, redisgate.ErrSequenceExhausted) {
		t.Fatalf("next after the last seq: %v, want ErrSequenceExhausted", err)
	}
}

func TestIDsRefuseAClockOutsideTheIDRange(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{Clock: testenv.NewClock(time.Date(2021, 12, 31, 0, 0, 0, 0, time.UTC))})
	if _, err := g.Next(context.Background()); err == nil {
		t.Fatal("issued an id before the 2022 epoch")
	}
}

// TestIDsFromALeaseAllocateNothing: an id handed out of a lease already held
// costs no allocation (the day is compared as a date, and formatted only
// for a lease).
func TestIDsFromALeaseAllocateNothing(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	g := redisgate.NewIDs(rdb, redisgate.IDOptions{Block: 1 << 20})
	next(t, g) // takes the lease
	if n := testing.AllocsPerRun(1000, func() { next(t, g) }); n != 0 {
		t.Fatalf("%.1f allocations per id from a held lease, want 0", n)
	}
}
