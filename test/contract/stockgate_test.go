package contract_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// gateUnderTest is a StockGate the suite can look into. Both adapters expose
// Stock and Buyers (reconciliation needs them too).
type gateUnderTest interface {
	ports.StockGate
	ports.GateAudit
}

// gateMessage is one order message a gate enqueued, as raw stream fields.
type gateMessage struct{ ID, UserID, VoucherID string }

type gateSubject struct {
	gate gateUnderTest
	// reserve is how the suite claims: the gate's Reserve, or for the Redis
	// gate in stream mode its ReserveAndAppend, which also enqueues.
	reserve func(ctx context.Context, o domain.VoucherOrder) error
	// messages returns what the gate enqueued for the voucher; nil when the
	// gate does not enqueue.
	messages func(t *testing.T, id domain.VoucherID) []gateMessage
}

type gateBackend struct {
	name string
	// open prepares the backend once (it may skip) and returns a factory of
	// fresh, empty gates, one per case.
	open func(t *testing.T) func(t *testing.T) gateSubject
}

func gateBackends() []gateBackend {
	// pipelined: the claim script goes through the client's automatic
	// pipeliner (half or full duplex), as in the service.
	type pipelining int
	const (
		plain pipelining = iota
		half
		full
	)
	redisSubject := func(t *testing.T, rdb redis.UniversalClient, enqueue bool, p pipelining) gateSubject {
		prefix := testenv.KeyPrefix(t)
		testenv.DropPrefix(t, rdb, prefix)
		opts := redisgate.Options{Prefix: prefix}
		if p != plain {
			opts.Claims = testenv.AutoPipelined(t, rdb, p == full)
		}
		g := redisgate.New(rdb, opts)
		s := gateSubject{gate: g, reserve: g.Reserve}
		if enqueue {
			s.reserve = g.ReserveAndAppend
			s.messages = func(t *testing.T, id domain.VoucherID) []gateMessage {
				return gateReadStream(t, rdb, redisschema.KeysFor(prefix, id).Orders)
			}
		}
		return s
	}
	mini := func(enqueue bool, p pipelining) func(t *testing.T) func(t *testing.T) gateSubject {
		return func(*testing.T) func(t *testing.T) gateSubject {
			return func(t *testing.T) gateSubject {
				_, rdb := testenv.MiniRedis(t)
				return redisSubject(t, rdb, enqueue, p)
			}
		}
	}
	real := func(connect func(testing.TB) redis.UniversalClient, enqueue bool, p pipelining) func(t *testing.T) func(t *testing.T) gateSubject {
		return func(t *testing.T) func(t *testing.T) gateSubject {
			rdb := connect(t)
			return func(t *testing.T) gateSubject { return redisSubject(t, rdb, enqueue, p) }
		}
	}
	backends := []gateBackend{
		{name: "memory", open: func(*testing.T) func(t *testing.T) gateSubject {
			return func(*testing.T) gateSubject {
				g := memory.NewGate(testenv.WallClock{}) // as the Redis gate reads Redis TIME: one set of windows fits both
				return gateSubject{gate: g, reserve: g.Reserve}
			}
		}},
		{name: "miniredis", open: mini(false, plain)},
		{name: "miniredis_enqueue", open: mini(true, plain)},
		{name: "miniredis_autopipelined", open: mini(false, half)},
		{name: "miniredis_enqueue_autopipelined", open: mini(true, half)},
	}
	for _, b := range testenv.RealRedisBackends() {
		backends = append(backends,
			gateBackend{name: b.Name, open: real(b.Client, false, plain)},
			gateBackend{name: b.Name + "_enqueue", open: real(b.Client, true, plain)},
			gateBackend{name: b.Name + "_autopipelined", open: real(b.Client, false, half)},
			gateBackend{name: b.Name + "_enqueue_autopipelined", open: real(b.Client, true, half)},
			gateBackend{name: b.Name + "_enqueue_full_duplex", open: real(b.Client, true, full)})
	}
	return backends
}

// Windows far from now on both sides, so clock skew between the test and
// Redis TIME cannot flip an answer.
func gateOpen() (time.Time, time.Time) {
	now := testenv.WallClock{}.Now()
	return now.Add(-time.Hour), now.Add(time.Hour)
}

func gateVoucher(t *testing.T, id domain.VoucherID, stock int, begin, end time.Time) domain.Voucher {
	t.Helper()
	sale, err := domain.NewSale(stock, begin, end)
	if err != nil {
		t.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "gate test"}, sale)
	if err != nil {
		t.Fatal(err)
	}
	return v.WithID(id)
}

func gateOpenVoucher(t *testing.T, id domain.VoucherID, stock int) domain.Voucher {
	begin, end := gateOpen()
	return gateVoucher(t, id, stock, begin, end)
}

func gateCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func gatePreheat(t *testing.T, g ports.StockGate, v domain.Voucher) {
	t.Helper()
	if err := g.Preheat(gateCtx(t), v); err != nil {
		t.Fatalf("preheat voucher %d: %v", v.ID(), err)
	}
}

func gateReserve(t *testing.T, s gateSubject, o domain.VoucherOrder, want error) {
	t.Helper()
	err := s.reserve(gateCtx(t), o)
	if !errors.Is(err, want) || (want == nil && err != nil) {
		t.Fatalf("reserve %s: got %v, want %v", o, err, want)
	}
}

func gateRelease(t *testing.T, g ports.StockGate, o domain.VoucherOrder, restoreStock bool) {
	t.Helper()
	if err := g.Release(gateCtx(t), o, restoreStock); err != nil {
		t.Fatalf("release %s: %v", o, err)
	}
}

// gateState asserts the gate's stock and buyers of a voucher.
func gateState(t *testing.T, g gateUnderTest, id domain.VoucherID, stock int, buyers map[domain.UserID]domain.OrderID) {
	t.Helper()
	got, ok, err := g.Stock(gateCtx(t), id)
	if err != nil {
		t.Fatalf("stock of %d: %v", id, err)
	}
	if !ok || got != stock {
		t.Fatalf("stock of %d: got %d (present %v), want %d", id, got, ok, stock)
	}
	held, err := g.Buyers(gateCtx(t), id)
	if err != nil {
		t.Fatalf("buyers of %d: %v", id, err)
	}
	gotBuyers := make(map[domain.UserID]domain.OrderID, len(held))
	for o, u := range held {
		if prev, two := gotBuyers[u]; two {
			t.Fatalf("buyers of %d: user %d holds orders %d and %d of a one-order sale", id, u, prev, o)
		}
		gotBuyers[u] = o
	}
	if len(gotBuyers) != len(buyers) {
		t.Fatalf("buyers of %d: got %d %v, want %d %v", id, len(gotBuyers), gateShort(gotBuyers), len(buyers), gateShort(buyers))
	}
	for u, o := range buyers {
		if gotBuyers[u] != o {
			t.Fatalf("buyers of %d: user %d holds %d, want %d", id, u, gotBuyers[u], o)
		}
	}
}

func gateShort(m map[domain.UserID]domain.OrderID) string {
	if len(m) > 10 {
		return "{...}"
	}
	return fmt.Sprint(m)
}

// gateMessages asserts that the gate enqueued exactly these orders, when it
// enqueues at all.
func gateMessages(t *testing.T, s gateSubject, id domain.VoucherID, want ...domain.VoucherOrder) {
	t.Helper()
	if s.messages == nil {
		return
	}
	got := s.messages(t, id)
	if len(got) != len(want) {
		t.Fatalf("stream of voucher %d: %d messages %v, want %d", id, len(got), got, len(want))
	}
	wantSet := make(map[gateMessage]bool, len(want))
	for _, o := range want {
		wantSet[gateMessage{
			ID:        fmt.Sprint(int64(o.ID())),
			UserID:    fmt.Sprint(int64(o.UserID())),
			VoucherID: fmt.Sprint(int64(o.VoucherID())),
		}] = true
	}
	for _, m := range got {
		if !wantSet[m] {
			t.Fatalf("stream of voucher %d: unexpected message %+v", id, m)
		}
		delete(wantSet, m)
	}
}

func gateQueued(t *testing.T, g ports.StockGate, user domain.UserID, id domain.OrderID) (domain.VoucherOrder, bool) {
	t.Helper()
	o, ok, err := g.Queued(gateCtx(t), user, id)
	if err != nil {
		t.Fatalf("queued(%d, %d): %v", user, id, err)
	}
	return o, ok
}

var gateCases = []struct {
	name string
	run  func(t *testing.T, s gateSubject)
}{
	{"not_found", func(t *testing.T, s gateSubject) {
		o := testenv.Order(t, 1, 1, 404)
		gateReserve(t, s, o, domain.ErrVoucherNotFound)
		gateRelease(t, s.gate, o, true)
		if _, ok := gateQueued(t, s.gate, 1, 1); ok {
			t.Fatal("queued found an order of a voucher never preheated")
		}
		if _, ok, err := s.gate.Stock(gateCtx(t), 404); err != nil || ok {
			t.Fatalf("release of an unknown voucher created it (present %v, err %v)", ok, err)
		}
	}},
	{"a_claim_resent_after_its_reply_was_lost_is_taken_once", func(t *testing.T, s gateSubject) {
		// A client resends the claim script when its connection is cut
		// before the reply (a failover): the resend finds the claim's own
		// mark and answers taken again, changing nothing, even when the
		// claim took the last unit. Another order of the same user is a
		// duplicate.
		gatePreheat(t, s.gate, gateOpenVoucher(t, 1, 2))
		first, last := testenv.Order(t, 11, 7, 1), testenv.Order(t, 12, 8, 1)
		gateReserve(t, s, first, nil)
		gateReserve(t, s, first, nil)
		gateReserve(t, s, last, nil)
		gateReserve(t, s, last, nil)
		gateReserve(t, s, first, nil)
		gateReserve(t, s, testenv.Order(t, 13, 7, 1), domain.ErrSoldOut)
		gateState(t, s.gate, 1, 0, map[domain.UserID]domain.OrderID{7: 11, 8: 12})
		gateMessages(t, s, 1, first, last)
		gatePreheat(t, s.gate, gateOpenVoucher(t, 2, 5))
		gateReserve(t, s, testenv.Order(t, 21, 7, 2), nil)
		gateReserve(t, s, testenv.Order(t, 22, 7, 2), domain.ErrAlreadyClaimed)
		gateState(t, s.gate, 2, 4, map[domain.UserID]domain.OrderID{7: 21})
	}},
	{"overwrite_replaces_whatever_the_gate_holds", func(t *testing.T, s gateSubject) {
		v := gateOpenVoucher(t, 1, 5)
		gatePreheat(t, s.gate, v)
		gateReserve(t, s, testenv.Order(t, 11, 7, 1), nil)
		gateReserve(t, s, testenv.Order(t, 12, 8, 1), nil)
		// The database knows only user 8's order and user 9's, and 3 left.
		db := []domain.VoucherOrder{testenv.Order(t, 12, 8, 1), testenv.Order(t, 13, 9, 1)}
		if err := s.gate.Overwrite(gateCtx(t), v.WithStock(3), db); err != nil {
			t.Fatal(err)
		}
		gateState(t, s.gate, 1, 3, map[domain.UserID]domain.OrderID{8: 12, 9: 13})
		gateReserve(t, s, testenv.Order(t, 14, 7, 1), nil)
		gateReserve(t, s, testenv.Order(t, 15, 9, 1), domain.ErrAlreadyClaimed)
		// Overwriting an absent voucher creates it, like Restore.
		w := gateOpenVoucher(t, 2, 4)
		if err := s.gate.Overwrite(gateCtx(t), w, nil); err != nil {
			t.Fatal(err)
		}
		gateState(t, s.gate, 2, 4, nil)
	}},
	{"not_started", func(t *testing.T, s gateSubject) {
		now := testenv.WallClock{}.Now()
		gatePreheat(t, s.gate, gateVoucher(t, 1, 5, now.Add(24*time.Hour), now.Add(48*time.Hour)))
		gateReserve(t, s, testenv.Order(t, 1, 1, 1), domain.ErrNotStarted)
		gateState(t, s.gate, 1, 5, nil)
		gateMessages(t, s, 1)
	}},
	{"ended", func(t *testing.T, s gateSubject) {
		now := testenv.WallClock{}.Now()
		gatePreheat(t, s.gate, gateVoucher(t, 1, 5, now.Add(-2*time.Hour), now.Add(-time.Hour)))
		gateReserve(t, s, testenv.Order(t, 1, 1, 1), domain.ErrEnded)
		gateState(t, s.gate, 1, 5, nil)
		gateMessages(t, s, 1)
	}},
	{"claim_succeeds_and_decrements", func(t *testing.T, s gateSubject) {
		gatePreheat(t, s.gate, gateOpenVoucher(t, 1, 3))
		o := testenv.Order(t, 11, 7, 1)
		gateReserve(t, s, o, nil)
		gateState(t, s.gate, 1, 2, map[domain.UserID]domain.OrderID{7: 11})
		gateMessages(t, s, 1, o)
	}},
	{"sold_out", func(t *testing.T, s gateSubject) {
		gatePreheat(t, s.gate, gateOpenVoucher(t, 1, 2))
		o1, o2 := testenv.Order(t, 11, 1, 1), testenv.Order(t, 12, 2, 1)
		gateReserve(t, s, o1, nil)
		gateReserve(t, s, o2, nil)
		gateReserve(t, s, testenv.Order(t, 13, 3, 1), domain.ErrSoldOut)
		// Stock is checked before the user: a buyer asking again after the
		// sale sold out hears sold out, as in the original.
		gateReserve(t, s, testenv.Order(t, 14, 1, 1), domain.ErrSoldOut)
		gateState(t, s.gate, 1, 0, map[domain.UserID]domain.OrderID{1: 11, 2: 12})
		gateMessages(t, s, 1, o1, o2)
	}},
	{"duplicate", func(t *testing.T, s gateSubject) {
		gatePreheat(t, s.gate, gateOpenVoucher(t, 1, 5))
		o := testenv.Order(t, 11, 1, 1)
		gateReserve(t, s, o, nil)
		gateReserve(t, s, testenv.Order(t, 12, 1, 1), domain.ErrAlreadyClaimed)
		gateState(t, s.gate, 1, 4, map[domain.UserID]domain.OrderID{1: 11})
		gateMessages(t, s, 1, o)
	}},
	{"one_user_many_vouchers", func(t *testing.T, s gateSubject) {
		gatePreheat(t, s.gate, gateOpenVoucher(t, 1, 5))
		gatePreheat(t, s.gate, gateOpenVoucher(t, 2, 5))
		gateReserve(t, s, testenv.Order(t, 11, 1, 1), nil)
		gateReserve(t, s, testenv.Order(t, 12, 1, 2), nil)
		gateState(t, s.gate, 1, 4, map[domain.UserID]domain.OrderID{1: 11})
		gateState(t, s.gate, 2, 4, map[domain.UserID]domain.OrderID{1: 12})
	}},
	{"release_restores_stock_and_right_to_claim", func(t *testing.T, s gateSubject) {
		gatePreheat(t, s.gate, gateOpenVoucher(t, 1, 1))
		o := testenv.Order(t, 11, 1, 1)
		gateReserve(t, s, o, nil)
		gateRelease(t, s.gate, o, true)
		gateState(t, s.gate, 1, 1, nil)
		gateReserve(t, s, testenv.Order(t, 12, 1, 1), nil)
		gateState(t, s.gate, 1, 0, map[domain.UserID]domain.OrderID{1: 12})
	}},
	{"release_without_stock_frees_only_the_user", func(t *testing.T, s gateSubject) {
		gatePreheat(t, s.gate, gateOpenVoucher(t, 1, 2))
		o := testenv.Order(t, 11, 1, 1)
		gateReserve(t, s, o, nil)
		gateRelease(t, s.gate, o, false)
		gateState(t, s.gate, 1, 1, nil)
		gateReserve(t, s, testenv.Order(t, 12, 1, 1), nil)
		gateState(t, s.gate, 1, 0, map[domain.UserID]domain.OrderID{1: 12})
	}},
	{"release_is_idempotent_and_guarded_by_order_id", func(t *testing.T, s gateSubject) {
		gatePreheat(t, s.gate, gateOpenVoucher(t, 1, 3))
		o := testenv.Order(t, 11, 1, 1)
		gateReserve(t, s, o, nil)
		gateRelease(t, s.gate, testenv.Order(t, 99, 1, 1), true) // another order of the same user
		gateRelease(t, s.gate, testenv.Order(t, 11, 2, 1), true) // the same ID for another user
		gateState(t, s.gate, 1, 2, map[domain.UserID]domain.OrderID{1: 11})
		gateRelease(t, s.gate, o, true)
		gateRelease(t, s.gate, o, true)
		gateState(t, s.gate, 1, 3, nil)
	}},
	{"preheat_never_overwrites_reservations", func(t *testing.T, s gateSubject) {
		// A retried or late Preheat (an admin's retry, or one that lost the
		// race to another instance's Restore) must not hand out sold units
		// again nor forget who holds one.
		v := gateOpenVoucher(t, 1, 5)
		gatePreheat(t, s.gate, v)
		gateReserve(t, s, testenv.Order(t, 11, 1, 1), nil)
		gatePreheat(t, s.gate, v)
		gateState(t, s.gate, 1, 4, map[domain.UserID]domain.OrderID{1: 11})
		gateReserve(t, s, testenv.Order(t, 12, 1, 1), domain.ErrAlreadyClaimed)
	}},
	{"preheat_after_restore_keeps_the_restored_buyers", func(t *testing.T, s gateSubject) {
		// The database's remaining stock (2) is below the sale's initial 3:
		// one unit is held by user 1.
		begin, end := gateOpen()
		if _, err := s.gate.Restore(gateCtx(t), gateVoucher(t, 1, 2, begin, end), []domain.VoucherOrder{testenv.Order(t, 11, 1, 1)}); err != nil {
			t.Fatal(err)
		}
		gatePreheat(t, s.gate, gateVoucher(t, 1, 3, begin, end))
		gateState(t, s.gate, 1, 2, map[domain.UserID]domain.OrderID{1: 11})
		gateReserve(t, s, testenv.Order(t, 12, 1, 1), domain.ErrAlreadyClaimed)
	}},
	{"preheat_twice_is_idempotent", func(t *testing.T, s gateSubject) {
		v := gateOpenVoucher(t, 1, 5)
		gatePreheat(t, s.gate, v)
		gatePreheat(t, s.gate, v)
		gateState(t, s.gate, 1, 5, nil)
		gateReserve(t, s, testenv.Order(t, 11, 1, 1), nil)
		gateState(t, s.gate, 1, 4, map[domain.UserID]domain.OrderID{1: 11})
	}},
	{"restore_writes_only_when_absent", func(t *testing.T, s gateSubject) {
		v := gateOpenVoucher(t, 1, 3)
		buyers := []domain.VoucherOrder{testenv.Order(t, 11, 1, 1), testenv.Order(t, 12, 2, 1)}
		wrote, err := s.gate.Restore(gateCtx(t), v, buyers)
		if err != nil || !wrote {
			t.Fatalf("restore into an empty gate: wrote %v, err %v", wrote, err)
		}
		gateState(t, s.gate, 1, 3, map[domain.UserID]domain.OrderID{1: 11, 2: 12})
		gateReserve(t, s, testenv.Order(t, 13, 1, 1), domain.ErrAlreadyClaimed)
		gateReserve(t, s, testenv.Order(t, 14, 3, 1), nil)
		// Restored buyers hold orders the database has, where status queries
		// find them; a claim after the restore is found queued.
		if o, ok := gateQueued(t, s.gate, 3, 14); !ok || o.VoucherID() != 1 {
			t.Fatalf("a claim after a restore is not found queued: %v %v", o, ok)
		}

		wrote, err = s.gate.Restore(gateCtx(t), v.WithStock(10), nil)
		if err != nil || wrote {
			t.Fatalf("restore over a present voucher: wrote %v, err %v", wrote, err)
		}
		gateState(t, s.gate, 1, 2, map[domain.UserID]domain.OrderID{1: 11, 2: 12, 3: 14})
	}},
	{"restore_does_not_clobber_preheat", func(t *testing.T, s gateSubject) {
		gatePreheat(t, s.gate, gateOpenVoucher(t, 1, 5))
		wrote, err := s.gate.Restore(gateCtx(t), gateOpenVoucher(t, 1, 1), []domain.VoucherOrder{testenv.Order(t, 11, 1, 1)})
		if err != nil || wrote {
			t.Fatalf("restore over a preheated voucher: wrote %v, err %v", wrote, err)
		}
		gateState(t, s.gate, 1, 5, nil)
	}},
	{"restore_without_buyers", func(t *testing.T, s gateSubject) {
		wrote, err := s.gate.Restore(gateCtx(t), gateOpenVoucher(t, 1, 2), nil)
		if err != nil || !wrote {
			t.Fatalf("restore: wrote %v, err %v", wrote, err)
		}
		gateReserve(t, s, testenv.Order(t, 11, 1, 1), nil)
		gateState(t, s.gate, 1, 1, map[domain.UserID]domain.OrderID{1: 11})
	}},
	{"restore_many_buyers", func(t *testing.T, s gateSubject) {
		const n = 2500 // several of the Redis adapter's chunks, and a partial one
		buyers := make([]domain.VoucherOrder, n)
		want := make(map[domain.UserID]domain.OrderID, n)
		for i := range buyers {
			u, id := domain.UserID(i+1), domain.OrderID(100_000+i)
			buyers[i] = testenv.Order(t, id, u, 1)
			want[u] = id
		}
		soldOut := gateOpenVoucher(t, 1, 1).WithStock(0) // as the database holds it after the sale
		wrote, err := s.gate.Restore(gateCtx(t), soldOut, buyers)
		if err != nil || !wrote {
			t.Fatalf("restore: wrote %v, err %v", wrote, err)
		}
		gateState(t, s.gate, 1, 0, want)
		gateReserve(t, s, testenv.Order(t, 1, n+1, 1), domain.ErrSoldOut)
	}},
	{"restore_refuses_foreign_buyers", func(t *testing.T, s gateSubject) {
		_, err := s.gate.Restore(gateCtx(t), gateOpenVoucher(t, 1, 2), []domain.VoucherOrder{testenv.Order(t, 11, 1, 2)})
		if err == nil {
			t.Fatal("restore accepted a buyer of another voucher")
		}
		if _, ok, err := s.gate.Stock(gateCtx(t), 1); err != nil || ok {
			t.Fatalf("a refused restore wrote the voucher (present %v, err %v)", ok, err)
		}
	}},
	{"queued_finds_a_reserved_order_and_not_another_users", func(t *testing.T, s gateSubject) {
		gatePreheat(t, s.gate, gateOpenVoucher(t, 1, 5))
		gatePreheat(t, s.gate, gateOpenVoucher(t, 2, 5))
		o := testenv.Order(t, 11, 1, 2)
		gateReserve(t, s, o, nil)
		gateReserve(t, s, testenv.Order(t, 12, 2, 1), nil)
		got, ok := gateQueued(t, s.gate, 1, 11)
		if !ok || got != o {
			t.Fatalf("queued(1, 11) = %v %v, want %v", got, ok, o)
		}
		if _, ok := gateQueued(t, s.gate, 2, 11); ok {
			t.Fatal("queued found user 1's order for user 2")
		}
		if _, ok := gateQueued(t, s.gate, 1, 12); ok {
			t.Fatal("queued found user 2's order for user 1")
		}
		// By its ID alone (a payment notice names no user): the same
		// order, and none for an ID nobody claimed.
		index, ok := s.gate.(ports.OrderIndex)
		if !ok {
			t.Fatalf("%T is not an OrderIndex", s.gate)
		}
		if got, ok, err := index.QueuedByID(gateCtx(t), 11); err != nil || !ok || got != o {
			t.Fatalf("queued by id 11 = %v %v %v, want %v", got, ok, err, o)
		}
		if _, ok, err := index.QueuedByID(gateCtx(t), 13); err != nil || ok {
			t.Fatalf("queued by id found an order nobody claimed (%v)", err)
		}
		gateRelease(t, s.gate, o, true)
		if _, ok := gateQueued(t, s.gate, 1, 11); ok {
			t.Fatal("queued found a released order")
		}
		if _, ok, err := index.QueuedByID(gateCtx(t), 11); err != nil || ok {
			t.Fatalf("queued by id found a released order (%v)", err)
		}
	}},
	{"start_gate_race", func(t *testing.T, s gateSubject) {
		const (
			stock   = 50
			users   = 500
			doubles = 100 // users 1..doubles fire twice
		)
		gatePreheat(t, s.gate, gateOpenVoucher(t, 1, stock))
		var (
			start    = make(chan struct{})
			wg       sync.WaitGroup
			nextID   atomic.Int64
			mu       sync.Mutex
			won      []domain.VoucherOrder
			soldOut  int
			dup      int
			failures []error
		)
		nextID.Store(1000)
		fire := func(u domain.UserID) {
			defer wg.Done()
			o, err := domain.NewVoucherOrder(domain.OrderID(nextID.Add(1)), u, 1)
			<-start
			if err == nil {
				err = s.reserve(context.Background(), o)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, o)
			case errors.Is(err, domain.ErrSoldOut):
				soldOut++
			case errors.Is(err, domain.ErrAlreadyClaimed):
				dup++
			default:
				failures = append(failures, err)
			}
		}
		for u := 1; u <= users; u++ {
			wg.Add(1)
			go fire(domain.UserID(u))
			if u <= doubles {
				wg.Add(1)
				go fire(domain.UserID(u))
			}
		}
		close(start)
		wg.Wait()

		if len(failures) > 0 {
			t.Fatalf("%d claims failed, first: %v", len(failures), failures[0])
		}
		if len(won) != stock {
			t.Fatalf("%d claims succeeded, want exactly %d", len(won), stock)
		}
		if soldOut+dup != users+doubles-stock {
			t.Fatalf("sold out %d + duplicate %d, want %d", soldOut, dup, users+doubles-stock)
		}
		want := make(map[domain.UserID]domain.OrderID, stock)
		for _, o := range won {
			if _, twice := want[o.UserID()]; twice {
				t.Fatalf("user %d won twice", o.UserID())
			}
			want[o.UserID()] = o.ID()
		}
		gateState(t, s.gate, 1, 0, want)
		gateMessages(t, s, 1, won...)
	}},
}

func TestStockGateContract(t *testing.T) {
	for _, b := range gateBackends() {
		t.Run(b.name, func(t *testing.T) {
			newSubject := b.open(t)
			for _, tc := range gateCases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, newSubject(t)) })
			}
		})
	}
}

func gateReadStream(t *testing.T, rdb redis.UniversalClient, key string) []gateMessage {
	t.Helper()
	entries, err := rdb.XRange(gateCtx(t), key, "-", "+").Result()
	if err != nil {
		t.Fatalf("read stream %s: %v", key, err)
	}
	out := make([]gateMessage, len(entries))
	for i, e := range entries {
		if len(e.Values) != 3 {
			t.Fatalf("stream %s entry %s has fields %v, want id, userId, voucherId", key, e.ID, e.Values)
		}
		out[i] = gateMessage{ID: fmt.Sprint(e.Values["id"]), UserID: fmt.Sprint(e.Values["userId"]), VoucherID: fmt.Sprint(e.Values["voucherId"])}
	}
	return out
}
