package chanqueue_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// A batch stays open for the linger after its first order, and what is
// published meanwhile joins it; once it holds max orders it is handed out
// without waiting the linger out. The linger here is an hour, so a Receive
// that waited it out would fail the test's guard, and one that did not wait
// for the later orders would return the first alone.
func TestABatchStaysOpenForTheLingerUntilFull(t *testing.T) {
	ctx := context.Background()
	q := chanqueue.New(16, time.Hour)
	publish := func(ids ...int64) {
		t.Helper()
		for _, id := range ids {
			o, err := domain.NewVoucherOrder(domain.OrderID(id), domain.UserID(id), 7)
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Publish(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	type result struct {
		ids []int64
		err error
	}
	got := make(chan result, 1)
	receive := func(max int) {
		go func() {
			ds, err := q.Receive(ctx, max)
			ids := make([]int64, len(ds))
			for i, d := range ds {
				ids[i] = int64(d.Order.ID())
			}
			got <- result{ids, err}
		}()
	}
	wait := func(want []int64) {
		t.Helper()
		select {
		case r := <-got:
			if r.err != nil || !slices.Equal(r.ids, want) {
				t.Fatalf("received %v, %v; want orders %v", r.ids, r.err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("a batch of %d orders was not handed out: it waited out the linger", len(want))
		}
	}

	publish(1)
	receive(3)
	publish(2, 3)
	wait([]int64{1, 2, 3})

	// Already full when it starts: handed out at once.
	publish(4, 5)
	receive(2)
	wait([]int64{4, 5})

	// Close hands out an open batch at once.
	publish(6)
	receive(3)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	wait([]int64{6})
	if _, err := q.Receive(ctx, 3); !errors.Is(err, ports.ErrQueueClosed) {
		t.Fatalf("Receive on a closed, empty queue: %v, want ErrQueueClosed", err)
	}
}
