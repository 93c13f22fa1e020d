package contract_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisstream"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// admissionSubject is one queue driver's admission with the gate it reserves
// in and the queue its orders reach: what the rest of the service sees of it.
type admissionSubject struct {
	admission ports.Admission
	gate      gateUnderTest
	queue     ports.OrderQueue
}

type admissionDriver struct {
	name string
	new  func(t *testing.T) admissionSubject
}

func admissionDrivers() []admissionDriver {
	channel := func(gate gateUnderTest) admissionSubject {
		q := chanqueue.New(1000, time.Millisecond)
		return admissionSubject{admission: chanqueue.NewAdmission(gate, q), gate: gate, queue: q}
	}
	channelOnRedis := func(rdb redis.UniversalClient) func(t *testing.T) admissionSubject {
		return func(t *testing.T) admissionSubject {
			prefix := testenv.KeyPrefix(t)
			testenv.DropPrefix(t, rdb, prefix)
			return channel(redisgate.New(rdb, redisgate.Options{Prefix: prefix}))
		}
	}
	stream := func(rdb redis.UniversalClient) func(t *testing.T) admissionSubject {
		return func(t *testing.T) admissionSubject {
			prefix := testenv.KeyPrefix(t)
			g := redisgate.New(rdb, redisgate.Options{Prefix: prefix})
			q := newStreamQueueAt(t, rdb, prefix)
			return admissionSubject{admission: redisstream.NewAdmission(g, q), gate: g, queue: q}
		}
	}
	return []admissionDriver{
		{"channel_memory", func(*testing.T) admissionSubject { return channel(memory.NewGate(testenv.WallClock{})) }},
		{"channel_miniredis", func(t *testing.T) admissionSubject {
			_, rdb := testenv.MiniRedis(t)
			return channelOnRedis(rdb)(t)
		}},
		{"channel_redis", func(t *testing.T) admissionSubject { return channelOnRedis(testenv.RealRedis(t))(t) }},
		{"stream_miniredis", func(t *testing.T) admissionSubject {
			_, rdb := testenv.MiniRedis(t)
			return stream(rdb)(t)
		}},
		{"stream_redis", func(t *testing.T) admissionSubject { return stream(testenv.RealRedis(t))(t) }},
	}
}

// TestAdmissionContract is "the same behaviour in channel and stream": an
// admitted order reaches the queue exactly once with its reservation held; a
// refusal changes nothing and enqueues nothing.
func TestAdmissionContract(t *testing.T) {
	for _, d := range admissionDrivers() {
		t.Run(d.name, func(t *testing.T) {
			t.Run("admitted_order_is_reserved_and_delivered", func(t *testing.T) {
				s := d.new(t)
				gatePreheat(t, s.gate, gateOpenVoucher(t, 1, 2))
				o := testenv.Order(t, 11, 7, 1)
				if err := s.admission.Admit(gateCtx(t), o); err != nil {
					t.Fatalf("admit: %v", err)
				}
				gateState(t, s.gate, 1, 1, map[domain.UserID]domain.OrderID{7: 11})
				got := queueReceiveAll(t, s.queue, 1, 10)
				if got[0].Order != o {
					t.Fatalf("delivered %v, want %v", got[0].Order, o)
				}
			})

			t.Run("refusals_change_nothing_and_enqueue_nothing", func(t *testing.T) {
				s := d.new(t)
				begin, end := gateOpen()
				gatePreheat(t, s.gate, gateVoucher(t, 1, 1, begin, end))
				gatePreheat(t, s.gate, gateVoucher(t, 2, 5, end, end.Add(time.Hour)))
				first := testenv.Order(t, 11, 7, 1)
				if err := s.admission.Admit(gateCtx(t), first); err != nil {
					t.Fatal(err)
				}
				for _, tc := range []struct {
					o    domain.VoucherOrder
					want error
				}{
					{testenv.Order(t, 12, 7, 1), domain.ErrSoldOut},
					{testenv.Order(t, 13, 8, 1), domain.ErrSoldOut},
					{testenv.Order(t, 14, 8, 2), domain.ErrNotStarted},
					{testenv.Order(t, 15, 8, 3), domain.ErrVoucherNotFound},
				} {
					err := s.admission.Admit(gateCtx(t), tc.o)
					if !errors.Is(err, tc.want) || !domain.IsRefusal(err) {
						t.Fatalf("admit %s = %v, want the refusal %v", tc.o, err, tc.want)
					}
				}
				gateState(t, s.gate, 1, 0, map[domain.UserID]domain.OrderID{7: 11})
				gateState(t, s.gate, 2, 5, map[domain.UserID]domain.OrderID{})
				// Only the first order is on the queue: a second one would come
				// out of this receive, whose batch has room for all five.
				got := queueReceiveAll(t, s.queue, 1, 5)
				if len(got) != 1 || got[0].Order != first {
					t.Fatalf("delivered %v, want only %v", got, first)
				}
			})

			t.Run("start_gate_race_admits_exactly_the_stock", func(t *testing.T) {
				s := d.new(t)
				const stock, users = 20, 200
				gatePreheat(t, s.gate, gateOpenVoucher(t, 1, stock))
				var (
					wg      sync.WaitGroup
					mu      sync.Mutex
					won     = map[domain.OrderID]bool{}
					refused int
					other   []error
				)
				start := make(chan struct{})
				for u := 1; u <= users; u++ {
					for attempt := 0; attempt < 2; attempt++ {
						wg.Add(1)
						o := testenv.Order(t, domain.OrderID(u*10+attempt), domain.UserID(u), 1)
						go func() {
							defer wg.Done()
							<-start
							err := s.admission.Admit(context.Background(), o)
							mu.Lock()
							defer mu.Unlock()
							switch {
							case err == nil:
								won[o.ID()] = true
							case domain.IsRefusal(err):
								refused++
							default:
								other = append(other, err)
							}
						}()
					}
				}
				close(start)
				wg.Wait()
				if len(other) > 0 || len(won) != stock || refused != 2*users-stock {
					t.Fatalf("admitted %d, refused %d, errors %v; want %d admitted", len(won), refused, other, stock)
				}
				got := queueReceiveAll(t, s.queue, stock, 100)
				buyers := map[domain.UserID]bool{}
				for _, dl := range got {
					if !won[dl.Order.ID()] || buyers[dl.Order.UserID()] {
						t.Fatalf("delivered %v: not admitted, or a second order of its user", dl.Order)
					}
					buyers[dl.Order.UserID()] = true
				}
				if left, _, err := s.gate.Stock(gateCtx(t), 1); err != nil || left != 0 {
					t.Fatalf("stock left %d, %v; want 0", left, err)
				}
			})
		})
	}
}

func TestStreamAdmissionRefusesAGateWritingStreamsItsQueueDoesNotRead(t *testing.T) {
	_, rdb := testenv.MiniRedis(t)
	prefix := testenv.KeyPrefix(t)
	q := newStreamQueueAt(t, rdb, prefix)
	defer func() {
		if recover() == nil {
			t.Fatal("NewAdmission accepted a gate with another key prefix")
		}
	}()
	redisstream.NewAdmission(redisgate.New(rdb, redisgate.Options{Prefix: prefix + "other:"}), q)
}
