package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/adapters/redisstream"
	"github.com/hmdp-go/seckill/adapters/worker"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
)

// runFulfil drains the same orders into a fresh database with one of the
// two writers, from a queue filled beforehand, so only the writing is timed.
func (e *env) runFulfil(ctx context.Context, m Mode, r *Result) (err error) {
	space, db, rdb, closeRun, err := e.openRun(ctx, ScenarioFulfil, m)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeRun()) }()

	n := e.opts.FulfilOrders
	r.Users, r.Stock = n, n
	v, err := saleVoucher(n)
	if err != nil {
		return err
	}
	saved, err := mysqlstore.NewVoucherRepo(db).AddSeckill(ctx, v)
	if err != nil {
		return fmt.Errorf("create voucher: %w", err)
	}
	orders, won, err := claimedOrders(saved.ID(), n)
	if err != nil {
		return err
	}

	stopProfile, err := e.startProfile(e.runName(r.Scenario, r.Mode, r.Round))
	if err != nil {
		return err
	}
	cpu0 := e.sample()
	workers := e.opts.FulfilWorkers
	var took time.Duration
	switch m {
	case ModePerOrder:
		took, err = perOrderDrain(ctx, db, rdb, space.prefix, orders, workers, r)
	case ModeBatched:
		took, err = e.batchedDrain(ctx, db, rdb, space.prefix, orders, workers, r)
	default:
		err = fmt.Errorf("mode %s is not a fulfilment mode", m)
	}
	stopProfile()
	if err != nil {
		return err
	}
	cost := costOf(windowOf(cpu0, e.sample(), 0, e.cores), n, false)
	r.CPU = &cost
	b, err := check(ctx, db, saved.ID(), n, won)
	if err != nil {
		return err
	}
	r.Books = &b
	r.HasDrain, r.Drained = true, b.Created+b.Failed == n
	r.DrainSeconds = took.Seconds()
	if took > 0 {
		r.OrdersPerSec = float64(b.Created) / took.Seconds()
	}
	r.note("%d workers", workers)
	if m == ModeBatched {
		alone, err := channelAlone(orders, e.opts.Base.BatchSize)
		if err != nil {
			return err
		}
		r.QueueAlonePerSec = alone
		r.note("the channel queue alone moves %.0f orders/s (publish + receive in batches of %d)", alone, e.opts.Base.BatchSize)
		if e.opts.wants(ModeStream) {
			alone, err := streamAlone(ctx, rdb, space.prefix, saved, orders, e.opts.Base.BatchSize, workers, e.opts.DrainTimeout)
			if err != nil {
				r.note("the stream queue alone could not be measured: %v", err)
			} else {
				r.StreamAlonePerSec = alone
				r.note("the stream queue alone hands out %.0f orders/s (%d consumers on one queue, as many as the writer's workers and as the service runs them, each receiving + acking batches of %d; entries written beforehand)", alone, workers, e.opts.Base.BatchSize)
			}
		}
	}
	return nil
}

// streamAlone times the Redis Stream queue's consuming side with no
// database behind it: the voucher's stream is filled beforehand (pipelined
// XADDs in the claim script's encoding), then consumers receive and ack every
// entry in batches. The producing side is the claim script's XADD, whose
// price shows in the claim modes.
//
// It runs `workers` consumers concurrently on one Queue, the same number as
// the batched writer it is compared with has workers, because that is how the
// service's workers use the queue: one Receive at a time, while the others'
// batches are in flight and acked. (Until the ack script stopped using XDEL
// for in-order acks it ran one consumer; the note says how many it ran.)
func streamAlone(ctx context.Context, rdb *redis.Client, prefix string, v domain.Voucher, orders []domain.VoucherOrder, batch, workers int, timeout time.Duration) (float64, error) {
	gate := redisgate.New(rdb, redisgate.Options{Prefix: prefix})
	if err := gate.Preheat(ctx, v); err != nil {
		return 0, err
	}
	key := redisschema.KeysFor(prefix, v.ID()).Orders
	for start := 0; start < len(orders); start += mintPipeline {
		end := min(start+mintPipeline, len(orders))
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, o := range orders[start:end] {
				p.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{
					"id", int64(o.ID()), "userId", int64(o.UserID()), "voucherId", int64(o.VoucherID())}})
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("fill the stream: %w", err)
		}
	}
	q, err := redisstream.New(rdb, redisstream.Options{Prefix: prefix, Consumer: "bench-" + randomName(), Block: 50 * time.Millisecond})
	if err != nil {
		return 0, err
	}
	defer q.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// done ends the consumers still waiting for entries once the last is
	// acked; the time is taken then.
	done, finish := context.WithCancel(ctx)
	defer finish()
	var (
		mu   sync.Mutex
		n    int
		took time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ds, err := q.Receive(done, batch)
				if err == nil {
					err = q.Ack(ctx, ds)
				}
				mu.Lock()
				if err != nil {
					if done.Err() == nil || ctx.Err() != nil {
						errs = append(errs, fmt.Errorf("after %d of %d: %w", n, len(orders), err))
						finish()
					}
					mu.Unlock()
					return
				}
				n += len(ds)
				if n >= len(orders) && took == 0 {
					took = time.Since(start)
					finish()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if n != len(orders) {
		return 0, fmt.Errorf("stream alone: handed out %d of %d", n, len(orders))
	}
	return float64(n) / took.Seconds(), nil
}

// claimedOrders are n orders of n users, as the claim path would have
// issued them, and the books' view of who was told what.
func claimedOrders(voucher domain.VoucherID, n int) ([]domain.VoucherOrder, map[int][]domain.OrderID, error) {
	now := time.Now()
	orders := make([]domain.VoucherOrder, n)
	won := make(map[int][]domain.OrderID, n)
	for i := range orders {
		id, err := domain.NewOrderID(now, uint32(i+1))
		if err != nil {
			return nil, nil, err
		}
		if orders[i], err = domain.NewVoucherOrder(id, domain.UserID(i+1), voucher); err != nil {
			return nil, nil, err
		}
		won[i] = []domain.OrderID{id}
	}
	return orders, won, nil
}

// perOrderDrain is the original's consumer (handleVoucherOrder): per order,
// the Redisson lock lock:order:<userId> (tryLock; a failed tryLock drops the
// order with a log line, as the original does), then createVoucherOrder in
// its own transaction: COUNT, the guarded decrement, INSERT.
func perOrderDrain(ctx context.Context, db *bun.DB, rdb redis.UniversalClient, prefix string, orders []domain.VoucherOrder, workers int, r *Result) (time.Duration, error) {
	ch := make(chan domain.VoucherOrder, len(orders))
	for _, o := range orders {
		ch <- o
	}
	close(ch)
	shop := &syncShop{db: db, rdb: rdb, prefix: prefix}
	var (
		mu    sync.Mutex
		kinds = map[string]int{}
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range ch {
				if ctx.Err() != nil {
					return
				}
				if err := shop.consume(ctx, o); err != nil {
					mu.Lock()
					kinds[err.Error()]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if len(kinds) > 0 {
		r.note("per-order consumer errors: %s", errorKinds(kinds))
	}
	return took, ctx.Err()
}

// batchedDrain is this service's fulfilment as wired in production: the
// worker adapter receiving batches from the channel queue and running
// FulfillOrders, whose OrderRepo.CreateBatch writes a batch in one
// transaction.
func (e *env) batchedDrain(ctx context.Context, db *bun.DB, rdb redis.UniversalClient, prefix string, orders []domain.VoucherOrder, workers int, r *Result) (time.Duration, error) {
	c := e.opts.Base
	q := chanqueue.New(len(orders), c.BatchLinger)
	for _, o := range orders {
		if err := q.Publish(ctx, o); err != nil {
			return 0, err
		}
	}
	// Closed up front: each worker returns once the queue is drained.
	_ = q.Close()
	gate := redisgate.New(rdb, redisgate.Options{Prefix: prefix, Retention: c.KeyRetention})
	fulfil := application.NewFulfillOrders(mysqlstore.NewOrderRepo(db), gate)
	logs := &logTail{armed: true}
	wk := worker.New(q, fulfil, zerolog.New(logs).Level(zerolog.WarnLevel), worker.Options{BatchSize: c.BatchSize})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := wk.Run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	logs.notes(r)
	r.note("batches of up to %d orders", c.BatchSize)
	return took, errors.Join(errs...)
}

// channelAlone times the channel queue with no database behind it: publish
// every order, receive them all in batches.
func channelAlone(orders []domain.VoucherOrder, batch int) (float64, error) {
	ctx := context.Background()
	q := chanqueue.New(len(orders), 0)
	start := time.Now()
	for _, o := range orders {
		if err := q.Publish(ctx, o); err != nil {
			return 0, err
		}
	}
	_ = q.Close()
	n := 0
	for {
		ds, err := q.Receive(ctx, batch)
		if err != nil {
			break
		}
		n += len(ds)
	}
	took := time.Since(start)
	if n != len(orders) {
		return 0, fmt.Errorf("channel alone: received %d of %d", n, len(orders))
	}
	return float64(n) / took.Seconds(), nil
}
