package redisstream

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// masterDown fails, as a dead master's connection does (EOF), every command
// that names one key, and lets the others through: what a cluster pipeline
// meets when one of its masters is killed. In a pipeline the commands of the
// other keys really run.
type masterDown struct{ key atomic.Pointer[string] }

func (f *masterDown) set(key string) { f.key.Store(&key) }

func (f *masterDown) names(cmd redis.Cmder) bool {
	k := f.key.Load()
	if k == nil || *k == "" {
		return false
	}
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && s == *k {
			return true
		}
	}
	return false
}

func (f *masterDown) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *masterDown) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.names(cmd) {
			cmd.SetErr(io.EOF)
			return io.EOF
		}
		return next(ctx, cmd)
	}
}

func (f *masterDown) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var live []redis.Cmder
		var failed error
		for _, c := range cmds {
			if f.names(c) {
				c.SetErr(io.EOF)
				failed = io.EOF
				continue
			}
			live = append(live, c)
		}
		if len(live) > 0 {
			if err := next(ctx, live); err != nil {
				return err
			}
		}
		return failed
	}
}

// TestAFailedMasterHoldsUpNoOtherStream: on a cluster every stream is read by
// a command of its own, pipelined. When one stream's master dies, the read of
// another stream, on a master that lives, still runs and moves its new entry
// into this consumer's pending list; that entry must be handed out at once,
// not stranded (pending to no reader) until MinIdle, and the dead stream must
// not hold up the others' reads, claims or drain. Once the master answers
// again its stream is read as before.
func TestAFailedMasterHoldsUpNoOtherStream(t *testing.T) {
	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb := b.Client(t)
			down := &masterDown{}
			rdb.AddHook(down)
			// MinIdle far above the test: only a prompt hand-out passes.
			q := newTestQueue(t, rdb, testenv.KeyPrefix(t), func(o *Options) { o.MinIdle = 10 * time.Minute })
			q.perStream = true // what a ClusterClient gets

			// Both streams known to the reader: one order each, read and finished.
			publishAll(t, q, order(t, 1, 1), order(t, 2, 2))
			first := testenv.ReceiveN(t, q, 2, 10)
			if err := q.Ack(ctx, first); err != nil {
				t.Fatal(err)
			}

			// Voucher 1's master dies; voucher 2 sells on.
			down.set(redisschema.KeysFor(q.opts.Prefix, 1).Orders)
			live := order(t, 3, 2)
			publishAll(t, q, live)
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			ds, err := q.Receive(rctx, 10)
			cancel()
			if err != nil || len(ds) != 1 || ds[0].Order != live {
				t.Fatalf("with voucher 1's master down, Receive = %v, %v; want voucher 2's new order at once", ds, err)
			}
			if err := q.Ack(ctx, ds); err != nil {
				t.Fatal(err)
			}

			// The master is back: its stream is read again.
			down.set("")
			back := order(t, 4, 1)
			publishAll(t, q, back)
			if got := testenv.ReceiveN(t, q, 1, 10); got[0].Order != back {
				t.Fatalf("after voucher 1's master came back got %v, want %v", got[0].Order, back)
			}

			// The same during a graceful stop: the live stream drains while
			// the dead one waits, and the drain ends once it answers.
			down.set(redisschema.KeysFor(q.opts.Prefix, 1).Orders)
			last := order(t, 5, 2)
			publishAll(t, q, last)
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			rctx, cancel = context.WithTimeout(ctx, 5*time.Second)
			ds, err = q.Receive(rctx, 10)
			cancel()
			if err != nil || len(ds) != 1 || ds[0].Order != last {
				t.Fatalf("draining with voucher 1's master down, Receive = %v, %v; want voucher 2's last order", ds, err)
			}
			down.set("")
			rctx, cancel = context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			for {
				ds, err := q.Receive(rctx, 10)
				if errors.Is(err, ports.ErrQueueClosed) {
					break
				}
				if err != nil || len(ds) > 0 {
					t.Fatalf("after the drain: %v, %v; want the queue closed", ds, err)
				}
			}
		})
	}
}

func publishAll(t *testing.T, q *Queue, orders ...domain.VoucherOrder) {
	t.Helper()
	for _, o := range orders {
		if err := q.Publish(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}
