package contract_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestGateControlsContract: GateControls.Apply over every gate (memory,
// the Redis gate and split vouchers on miniredis, a real Redis and the
// cluster): an end set to now makes the next claim answer ended; an end set
// later again reopens the sale with its stock and buyers as they were; a
// voucher the gate does not hold stays absent.
func TestGateControlsContract(t *testing.T) {
	ctx := context.Background()
	for _, b := range returnBackends() {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)(t, false)
			g, ok := s.gate.(ports.GateControls)
			if !ok {
				t.Fatalf("%T is not a GateControls", s.gate)
			}
			v := s.voucher(t, 41, 4)
			if err := s.gate.Preheat(ctx, v); err != nil {
				t.Fatal(err)
			}
			orderOf := func(id domain.OrderID, user domain.UserID, voucher domain.VoucherID) domain.VoucherOrder {
				o, err := domain.NewVoucherOrder(id, user, voucher)
				if err != nil {
					t.Fatal(err)
				}
				return o
			}
			order := func(id domain.OrderID, user domain.UserID) domain.VoucherOrder { return orderOf(id, user, v.ID()) }
			if err := s.reserve(ctx, order(1, 1)); err != nil {
				t.Fatalf("claim before the end: %v", err)
			}
			// Ended a second after its begin: in the past on every clock
			// the gate may keep (miniredis's is set once, when it starts).
			ended, err := v.Sale().EndNow(v.Sale().Begin().Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // idempotent
				if err := g.Apply(ctx, v.WithSale(ended)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.reserve(ctx, order(2, 2)); !errors.Is(err, domain.ErrEnded) {
				t.Fatalf("claim after the end answered %v, want ended", err)
			}
			// Taken before the end, resent after it: still taken.
			if err := s.reserve(ctx, order(1, 1)); err != nil {
				t.Fatalf("claim resent after the end answered %v, want taken", err)
			}
			if err := g.Apply(ctx, v); err != nil {
				t.Fatal(err)
			}
			if err := s.reserve(ctx, order(3, 3)); err != nil {
				t.Fatalf("claim after the end moved later: %v", err)
			}
			if err := s.reserve(ctx, order(4, 1)); !errors.Is(err, domain.ErrAlreadyClaimed) {
				t.Fatalf("the first buyer claims again: %v, want duplicate", err)
			}
			absent := s.voucher(t, 42, 4)
			if err := g.Apply(ctx, absent); err != nil {
				t.Fatal(err)
			}
			if err := s.reserve(ctx, orderOf(5, 5, absent.ID())); !errors.Is(err, domain.ErrVoucherNotFound) {
				t.Fatalf("claim of a voucher Apply was given but the gate never held: %v, want not_found", err)
			}
		})
	}
}

// controlsSubject opens a gate of backend b with voucher v (stock 10)
// preheated, and its GateControls.
func controlsSubject(t *testing.T, b returnBackend, stock int) (returnSubject, ports.GateControls, domain.Voucher) {
	t.Helper()
	s := b.open(t)(t, false)
	g, ok := s.gate.(ports.GateControls)
	if !ok {
		t.Fatalf("%T is not a GateControls", s.gate)
	}
	v := s.voucher(t, 51, stock)
	if err := s.gate.Preheat(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	return s, g, v
}

func gateStockOf(t *testing.T, s returnSubject, id domain.VoucherID) int {
	t.Helper()
	n, ok, err := s.gate.Stock(context.Background(), id)
	if err != nil || !ok {
		t.Fatalf("gate stock: %d %v %v", n, ok, err)
	}
	return n
}

// TestGateAddStockContract: Apply of a sale with units added raises the
// gate's stock by the units it has not taken yet, once however often it
// runs; a gate rebuilt from the database (whose stock holds them) takes
// none again; and under a stampede racing the additions, exactly the
// initial stock plus the added units are sold, never one more.
func TestGateAddStockContract(t *testing.T) {
	ctx := context.Background()
	now := testenv.WallClock{}.Now()
	for _, b := range returnBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Run("added_once", func(t *testing.T) {
				s, g, v := controlsSubject(t, b, 4)
				more, err := v.Sale().AddStock(3, now)
				if err != nil {
					t.Fatal(err)
				}
				for range 3 {
					if err := g.Apply(ctx, v.WithSale(more)); err != nil {
						t.Fatal(err)
					}
				}
				if got := gateStockOf(t, s, v.ID()); got != 7 {
					t.Fatalf("gate stock %d after adding 3 to 4 (applied thrice), want 7", got)
				}
				// A stale apply (an older total) takes nothing back.
				if err := g.Apply(ctx, v); err != nil {
					t.Fatal(err)
				}
				if got := gateStockOf(t, s, v.ID()); got != 7 {
					t.Fatalf("gate stock %d after a stale apply, want 7", got)
				}
			})
			t.Run("rebuilt_from_the_database_takes_none_again", func(t *testing.T) {
				s, g, v := controlsSubject(t, b, 4)
				more, _ := v.Sale().AddStock(3, now)
				stored := v.WithSale(more)
				// The database committed the addition; the gate was rebuilt
				// from it before the control's own Apply ran.
				if err := s.gate.Overwrite(ctx, stored, nil); err != nil {
					t.Fatal(err)
				}
				if err := g.Apply(ctx, stored); err != nil {
					t.Fatal(err)
				}
				if got := gateStockOf(t, s, v.ID()); got != 7 {
					t.Fatalf("gate stock %d, want 7: the rebuilt gate took the added units twice", got)
				}
			})
			t.Run("never_oversold_while_stock_is_added", func(t *testing.T) {
				const initial, users = 10, 120
				s, g, v := controlsSubject(t, b, initial)
				adds := []int{5, 5, 3}
				start := make(chan struct{})
				var wg sync.WaitGroup
				var sold atomic.Int64
				for u := 1; u <= users; u++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						o, _ := domain.NewVoucherOrder(domain.OrderID(1000+u), domain.UserID(u), v.ID())
						if err := s.reserve(ctx, o); err == nil {
							sold.Add(1)
						} else if !domain.IsRefusal(err) && !errors.Is(err, ports.ErrNotAdmitted) {
							t.Errorf("claim: %v", err)
						}
					}()
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					sale := v.Sale()
					for _, n := range adds {
						var err error
						if sale, err = sale.AddStock(n, now); err != nil {
							t.Error(err)
							return
						}
						if err := g.Apply(ctx, v.WithSale(sale)); err != nil {
							t.Error(err)
						}
					}
				}()
				close(start)
				wg.Wait()
				total := initial + 5 + 5 + 3
				left := gateStockOf(t, s, v.ID())
				if int(sold.Load())+left != total || left < 0 {
					t.Fatalf("sold %d, left %d: want them to sum to %d (initial %d + added 13)", sold.Load(), left, total, initial)
				}
			})
		})
	}
}

// TestGatePauseContract: a paused sale's claims answer paused until it is
// resumed; stock and buyers are kept. A claim resent after its reply was lost
// was taken before the pause: it answers taken, not paused (told paused, its
// buyer would hold an order it was refused, and its ID would be handed back
// for another order to reuse).
func TestGatePauseContract(t *testing.T) {
	ctx := context.Background()
	now := testenv.WallClock{}.Now()
	for _, b := range returnBackends() {
		t.Run(b.name, func(t *testing.T) {
			s, g, v := controlsSubject(t, b, 3)
			taken, _ := domain.NewVoucherOrder(1, 1, v.ID())
			if err := s.reserve(ctx, taken); err != nil {
				t.Fatal(err)
			}
			paused, err := v.Sale().WithPause(true, now)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := g.Apply(ctx, v.WithSale(paused)); err != nil {
					t.Fatal(err)
				}
			}
			other, _ := domain.NewVoucherOrder(2, 2, v.ID())
			if err := s.reserve(ctx, other); !errors.Is(err, domain.ErrPaused) {
				t.Fatalf("claim %s of a paused sale: %v, want paused", other, err)
			}
			if err := s.reserve(ctx, taken); err != nil {
				t.Fatalf("claim %s resent while paused: %v, want taken", taken, err)
			}
			if got := gateStockOf(t, s, v.ID()); got != 2 {
				t.Fatalf("gate stock %d while paused, want 2", got)
			}
			if err := g.Apply(ctx, v); err != nil {
				t.Fatal(err)
			}
			if err := s.reserve(ctx, other); err != nil {
				t.Fatalf("claim after resume: %v", err)
			}
			again, _ := domain.NewVoucherOrder(3, 1, v.ID())
			if err := s.reserve(ctx, again); !errors.Is(err, domain.ErrAlreadyClaimed) {
				t.Fatalf("the first buyer claims again after resume: %v, want duplicate", err)
			}
		})
	}
}
