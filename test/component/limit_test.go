package component_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
)

// TestLimitPerUserThroughTheService: a sale of 3 orders per user, created
// over HTTP, on each queue and split over buckets: a user's burst of
// claims takes exactly 3 units, a fourth claim is a duplicate, a cancelled
// order keeps its place, and MySQL holds each user's orders in distinct
// places, never more than 3, with the books balanced.
func TestLimitPerUserThroughTheService(t *testing.T) {
	for _, tc := range []struct {
		name, queue string
		buckets     int
	}{
		{"channel", infra.QueueChannel, 1},
		{"stream", infra.QueueStream, 1},
		{"stream_split", infra.QueueStream, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app, _ := startServiceOn(t, tc.queue, "redis", func(c *infra.Config) { c.PayWindow = time.Hour })
			const stock, limit = 10, 3
			body := saleBody(stock)
			body["limitPerUser"] = limit
			body["buckets"] = tc.buckets
			status, env := postJSON(t, http.DefaultClient, "http://"+app.Addr()+"/voucher/seckill", login(t, app, adminUID), body)
			if status != http.StatusOK || !env.Success {
				t.Fatalf("create: %d %+v", status, env)
			}
			var s string
			if err := json.Unmarshal(env.Data, &s); err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.ParseInt(s, 10, 64)
			vid := domain.VoucherID(n)

			// A burst of 6 claims from one user: 3 taken, 3 duplicates.
			const burster = domain.UserID(7_000_001)
			token := login(t, app, burster)
			envs := make([]envelope, 6)
			var wg sync.WaitGroup
			for i := range envs {
				wg.Go(func() { envs[i] = claim(t, app, vid, token) })
			}
			wg.Wait()
			var mine []domain.OrderID
			for _, e := range envs {
				switch {
				case e.Success:
					mine = append(mine, orderIDOf(t, e))
				case e.Code != domain.ErrAlreadyClaimed.Code():
					t.Fatalf("a burst claim answered %+v", e)
				}
			}
			if len(mine) != limit {
				t.Fatalf("the burst took %d orders, want %d", len(mine), limit)
			}
			// Two more users take 3 each; a fourth gets the last unit.
			for u := domain.UserID(7_000_002); u <= 7_000_003; u++ {
				for range limit {
					mustClaim(t, app, vid, u)
				}
			}
			last := login(t, app, 7_000_004)
			if e := claim(t, app, vid, last); !e.Success {
				t.Fatalf("the last unit: %+v", e)
			}
			if e := claim(t, app, vid, last); e.Success || e.Code != domain.ErrSoldOut.Code() {
				t.Fatalf("past the stock: %+v, want sold out", e)
			}
			waitOrders(t, app, vid, stock)
			perUser(t, app, vid, map[domain.UserID]int{burster: 3, 7_000_002: 3, 7_000_003: 3, 7_000_004: 1})

			// A cancelled order keeps its place: its unit goes to another user.
			status, env = postJSON(t, http.DefaultClient, fmt.Sprintf("http://%s/voucher-order/%d/cancel", app.Addr(), mine[0]), token, nil)
			if status != http.StatusOK || !env.Success {
				t.Fatalf("cancel: %d %+v", status, env)
			}
			if e := claim(t, app, vid, token); e.Success || e.Code != domain.ErrAlreadyClaimed.Code() {
				t.Fatalf("a claim after a cancel: %+v, want duplicate", e)
			}
			mustClaim(t, app, vid, 7_000_005)
			waitOrders(t, app, vid, stock+1)
			lifecycleBalanced(t, app, vid, stock)
		})
	}
}

// perUser asserts how many orders of vid each user holds in MySQL, each in
// its own place (slot).
func perUser(t *testing.T, app *infra.App, vid domain.VoucherID, want map[domain.UserID]int) {
	t.Helper()
	var rows []struct {
		UserID int64 `bun:"user_id"`
		N      int   `bun:"n"`
		Slots  int   `bun:"slots"`
	}
	if err := app.DB.NewSelect().Table("tb_voucher_order").ColumnExpr("user_id, COUNT(*) AS n, COUNT(DISTINCT slot) AS slots").
		Where("voucher_id = ?", vid).Group("user_id").Scan(context.Background(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(want) {
		t.Fatalf("%d users hold orders, want %d: %+v", len(rows), len(want), rows)
	}
	for _, r := range rows {
		if r.N != want[domain.UserID(r.UserID)] || r.Slots != r.N {
			t.Fatalf("user %d holds %d orders in %d places, want %d", r.UserID, r.N, r.Slots, want[domain.UserID(r.UserID)])
		}
	}
}
