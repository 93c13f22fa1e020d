package contract_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// deadMaster plays the first of three masters with even slot ranges dying:
// every command on a key of the test's prefix whose slot is in 0..5460
// fails as a reset connection does, or hangs until its context ends.
type deadMaster struct {
	prefix string
	stall  bool

	mu       sync.Mutex
	attempts map[string]int // per dead key
	total    atomic.Int64
}

func (d *deadMaster) dead(cmd redis.Cmder) (string, bool) {
	args := cmd.Args()
	if len(args) < 2 {
		return "", false
	}
	key, ok := args[1].(string)
	if !ok || !strings.HasPrefix(key, d.prefix) || redisschema.Slot(key) > 5460 {
		return "", false
	}
	return key, true
}

func (d *deadMaster) DialHook(next redis.DialHook) redis.DialHook { return next }
func (d *deadMaster) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		key, dead := d.dead(cmd)
		if !dead {
			return next(ctx, cmd)
		}
		d.mu.Lock()
		d.attempts[key]++
		d.mu.Unlock()
		d.total.Add(1)
		err := error(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET})
		if d.stall {
			<-ctx.Done()
			err = ctx.Err()
		}
		cmd.SetErr(err)
		return err
	}
}
func (d *deadMaster) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestOrderIDsOutliveADeadMaster: with the master of a third of the slots
// dead, three instances keep issuing ids, each within a claim's budget, none
// twice, and each instance tries a dead shard once per IDShardRetry at most.
func TestOrderIDsOutliveADeadMaster(t *testing.T) {
	for _, b := range testenv.Redises() {
		for _, mode := range []string{"refuses", "stalls"} {
			t.Run(b.Name+"/"+mode, func(t *testing.T) {
				rdb := b.Client(t) // a client of this test alone: the hook is on it
				prefix := testenv.KeyPrefix(t)
				testenv.DropPrefix(t, rdb, prefix)
				dm := &deadMaster{prefix: prefix, stall: mode == "stalls", attempts: map[string]int{}}
				rdb.AddHook(dm)
				clock := testenv.NewClock(idsDay)
				instances := make([]ports.OrderIDs, 3)
				for i := range instances {
					g := redisgate.NewIDs(rdb, redisgate.IDOptions{Prefix: prefix + "icr:order:", Block: idsBlock, Clock: clock})
					t.Cleanup(func() { _ = g.Close() })
					instances[i] = g
				}
				start := time.Now()
				var seen idsSeen
				var wg sync.WaitGroup
				for _, g := range instances {
					for range 4 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for range 150 {
								// A claim's budget: the ids of a sale that
								// lost a master must still come in time.
								ctx, cancel := context.WithTimeout(context.Background(), application.ClaimBudget)
								id, err := g.Next(ctx)
								cancel()
								if err != nil {
									t.Errorf("next order id with a master dead: %v", err)
									return
								}
								seen.add(t, id)
							}
						}()
					}
				}
				wg.Wait()
				elapsed := time.Since(start)
				if t.Failed() {
					return
				}
				if want := 3 * 4 * 150; len(seen.ids) != want {
					t.Fatalf("%d distinct ids, want %d", len(seen.ids), want)
				}
				if dm.total.Load() == 0 {
					t.Fatal("no lease met the dead master: the test proved nothing")
				}
				// Each instance tries a dead shard once, and again only once
				// IDShardRetry has passed.
				allowed := len(instances) * (1 + int(elapsed/redisgate.IDShardRetry))
				dm.mu.Lock()
				defer dm.mu.Unlock()
				for key, n := range dm.attempts {
					if n > allowed {
						t.Errorf("dead shard %s tried %d times in %s, want at most %d", key, n, elapsed, allowed)
					}
				}
				t.Logf("%d ids in %s; %d attempts at %d dead shards", len(seen.ids), elapsed, dm.total.Load(), len(dm.attempts))
			})
		}
	}
}
