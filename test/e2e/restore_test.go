package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/hmdp-go/seckill/adapters/redisschema"
)

// TestStartRebuildsAGateRedisLost: Redis loses a live sale's keys (a restart
// without persistence); the next start rebuilds them from MySQL, so buyers
// stay buyers and only MySQL's remaining stock is sold.
func TestStartRebuildsAGateRedisLost(t *testing.T) {
	c := newCluster(t, "SECKILL_QUEUE=stream")
	p := c.start("first")
	vid := p.createVoucher(t, 5)
	tokens := c.mint(7, 13_000_000)
	claimAll(t, []*proc{p}, vid, tokens[:3])
	p.stop(t) // drains: MySQL holds the 3 orders

	k := redisschema.KeysFor(c.prefix, vid)
	if err := c.rdb.Del(context.Background(), k.Voucher, k.Buyers).Err(); err != nil {
		t.Fatal(err)
	}

	p = c.start("restarted")
	b := c.books(vid)
	if b.redisStock != 2 || b.buyers != 3 || b.orders != 3 {
		t.Fatalf("after the restart: %+v; want Redis rebuilt as stock 2 with the 3 buyers", b)
	}
	claim := func(i int) string {
		_, env := call(t, http.DefaultClient, http.MethodPost, fmt.Sprintf("%s/voucher-order/seckill/%d", p.base, vid), tokens[i], nil)
		if env.Success {
			return "ok"
		}
		return env.Code
	}
	if got := claim(0); got != "duplicate" {
		t.Fatalf("a buyer from before the loss: %s, want duplicate", got)
	}
	got := []string{claim(3), claim(4), claim(5)}
	if fmt.Sprint(got) != "[ok ok sold_out]" {
		t.Fatalf("new users got %v, want two sales then sold_out", got)
	}
}
