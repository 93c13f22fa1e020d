package component_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

const componentPaySecret = "component-payment-secret-0123456789"

// notifyPayment posts a signed payment notification; the answer's state.
func notifyPayment(t *testing.T, app *infra.App, id domain.OrderID, amount int64) (int, string) {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"orderId":"%d","amount":%d,"transactionId":"tx-%d"}`, id, amount, id))
	req, err := http.NewRequest(http.MethodPost, "http://"+app.Addr()+"/payments/notify", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(httpapi.SignatureHeader, httpapi.Sign([]byte(componentPaySecret), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data struct {
			State string `json:"state"`
		} `json:"data"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&env)
	return resp.StatusCode, env.Data.State
}

func orderIDOf(t *testing.T, env envelope) domain.OrderID {
	t.Helper()
	var s string
	if err := json.Unmarshal(env.Data, &s); err != nil {
		t.Fatalf("order id %s: %v", env.Data, err)
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return domain.OrderID(id)
}

// TestHalfPayHalfExpire: of a sale's winners half pay and half do not; the
// unpaid orders expire on the service's own loop and their units go back on
// sale in MySQL and Redis, and a stampede of new users (some of them buyers
// whose order expired) buys exactly the returned units, no more.
func TestHalfPayHalfExpire(t *testing.T) {
	const (
		stock    = 20
		newUsers = 60
		firstUID = 2_000_000
	)
	for _, queue := range []string{infra.QueueChannel, infra.QueueStream} {
		t.Run(queue, func(t *testing.T) {
			app, base := startServiceOn(t, queue, "redis", func(c *infra.Config) {
				// Short enough to wait for, long enough for the payments to
				// land first (a late one turns refunding, and the test
				// counts it as returned: it stays right either way).
				c.PayWindow = 4 * time.Second
				c.PaymentSecret = componentPaySecret
			})
			ctx := context.Background()
			vid := createVoucher(t, app, stock)
			ids := make([]domain.OrderID, stock)
			for i := range ids {
				env := claim(t, app, vid, login(t, app, domain.UserID(firstUID+i)))
				if !env.Success {
					t.Fatalf("claim %d: %+v", i, env)
				}
				ids[i] = orderIDOf(t, env)
			}
			waitOrders(t, app, vid, stock)
			paid := 0
			for _, id := range ids[:stock/2] {
				status, state := notifyPayment(t, app, id, 100)
				if status != http.StatusOK {
					t.Fatalf("payment of %d: %d", id, status)
				}
				if state == "paid" {
					paid++
				}
			}
			if paid == 0 {
				t.Fatal("no payment landed before its deadline: the test proves nothing")
			}
			returned := stock - paid
			testenv.Eventually(t, 30*time.Second, func() (bool, string) {
				var n int
				err := app.DB.NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*)").
					Where("voucher_id = ? AND status IN (4, 5) AND returned = ?", vid, true).Scan(ctx, &n)
				return err == nil && n == returned, fmt.Sprintf("%d of %d units returned (%v)", n, returned, err)
			})
			if s := mysqlStock(t, app, vid); s != returned {
				t.Fatalf("MySQL stock %d, want %d", s, returned)
			}
			// One instance did every expiry, and counted each once.
			fams := scrape(t, "http://"+app.Observability.MetricsAddr()+"/metrics")
			if got := value(fams, "seckill_orders_expired_total", "", ""); got != float64(returned) {
				t.Fatalf("seckill_orders_expired_total = %v, want %d", got, returned)
			}
			if got := histCount(fams, "seckill_order_expiry_lag_seconds"); got != uint64(returned) {
				t.Fatalf("expiry lag observations = %d, want %d", got, returned)
			}
			late := float64(stock/2 - paid) // payments that lost the race to their expiry
			if got := value(fams, "seckill_payments_total", "kind", "settled"); got != float64(paid) {
				t.Fatalf("settled payments = %v, want %d", got, paid)
			}
			if got := value(fams, "seckill_payments_total", "kind", "late"); got != late {
				t.Fatalf("late payments = %v, want %v", got, late)
			}
			lifecycleBalanced(t, app, vid, stock)

			// New buyers, and five whose order expired, at once: an expired
			// order forfeited its buyer's place (duplicate, or sold_out where
			// the instance already knows the sale is out).
			users := make([]domain.UserID, 0, newUsers+5)
			for i := range newUsers {
				users = append(users, domain.UserID(firstUID+1000+i))
			}
			for i := stock - 5; i < stock; i++ {
				users = append(users, domain.UserID(firstUID+i))
			}
			tokens := make([]string, len(users))
			for i, u := range users {
				tokens[i] = login(t, app, u)
			}
			var mu sync.Mutex
			codes := map[string]int{}
			start := make(chan struct{})
			var wg sync.WaitGroup
			forfeitedWon := 0
			for i, tok := range tokens {
				wg.Go(func() {
					<-start
					_, env := postJSON(t, http.DefaultClient, fmt.Sprintf("%s/voucher-order/seckill/%d", base, vid), tok, nil)
					mu.Lock()
					defer mu.Unlock()
					if env.Success {
						codes["success"]++
						if i >= newUsers {
							forfeitedWon++
						}
					} else {
						codes[env.Code]++
					}
				})
			}
			close(start)
			wg.Wait()
			if codes["success"] != returned || codes["success"]+codes["sold_out"]+codes["duplicate"] != len(tokens) ||
				codes["duplicate"] > 5 || forfeitedWon != 0 {
				t.Fatalf("answers %v (%d to buyers whose order expired), want exactly %d successes, all new buyers', the rest sold_out or duplicate",
					codes, forfeitedWon, returned)
			}
			testenv.Eventually(t, 30*time.Second, func() (bool, string) {
				var n int
				err := app.DB.NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*)").
					Where("voucher_id = ? AND status IN (1, 2)", vid).Scan(ctx, &n)
				return err == nil && n == stock, fmt.Sprintf("%d orders hold a unit, want %d (%v)", n, stock, err)
			})
			if s := mysqlStock(t, app, vid); s != 0 {
				t.Fatalf("MySQL stock %d, want 0", s)
			}
			lifecycleBalanced(t, app, vid, stock)
		})
	}
}

// lifecycleBalanced asserts the lifecycle's invariant once nothing is in
// flight: stock left + unpaid + paid = the initial stock in MySQL, and stock
// left + marked buyers = the initial stock in Redis; cancelled and
// refunding orders hold nothing on either side.
func lifecycleBalanced(t *testing.T, app *infra.App, vid domain.VoucherID, initial int) {
	t.Helper()
	ctx := context.Background()
	var holders int
	if err := app.DB.NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*)").
		Where("voucher_id = ? AND status IN (1, 2, 3)", vid).Scan(ctx, &holders); err != nil {
		t.Fatal(err)
	}
	if s := mysqlStock(t, app, vid); s+holders != initial {
		t.Fatalf("MySQL: stock %d + unpaid and paid %d != %d", s, holders, initial)
	}
	stock, ok, err := app.Gate.Stock(ctx, vid)
	if err != nil || !ok {
		t.Fatalf("gate stock: %v (present %v)", err, ok)
	}
	buyers, err := app.Gate.Buyers(ctx, vid)
	if err != nil {
		t.Fatal(err)
	}
	if stock+len(buyers) != initial {
		t.Fatalf("Redis: stock %d + buyers %d != %d", stock, len(buyers), initial)
	}
}

// TestExpiryFinishesAfterACrash injects, on the real Redis and MariaDB, the
// two crashes an expiry can meet, and lets the running service's loop
// finish them: each unit comes back to the gate exactly once.
//   - after_mysql_before_redis: the cancelling transaction committed (order
//     cancelled, MySQL stock back), the process died before the gate's
//     release: the loop releases it.
//   - after_redis_before_returned: the gate's release ran, the process died
//     before recording it: the loop releases again, which must be a no-op.
func TestExpiryFinishesAfterACrash(t *testing.T) {
	for _, tt := range []struct {
		name         string
		releasedOnce bool // the crash came after the gate's release
	}{
		{"after_mysql_before_redis", false},
		{"after_redis_before_returned", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Orders never expire on their own here: the test plays the
			// crashed instance, the service's loop finishes its work.
			app, _ := startServiceOn(t, infra.QueueChannel, "redis", func(c *infra.Config) { c.PayWindow = 0 })
			ctx := context.Background()
			vid := createVoucher(t, app, 2)
			const user = 3_000_000
			id := orderIDOf(t, claim(t, app, vid, login(t, app, user)))
			waitOrders(t, app, vid, 1)
			if _, err := app.DB.ExecContext(ctx,
				"UPDATE tb_voucher_order SET status = 4, cancel_reason = 'expired', returned = 0 WHERE id = ?", int64(id)); err != nil {
				t.Fatal(err)
			}
			if _, err := app.DB.ExecContext(ctx, "UPDATE tb_seckill_voucher SET stock = stock + 1 WHERE voucher_id = ?", int64(vid)); err != nil {
				t.Fatal(err)
			}
			o, err := domain.NewVoucherOrder(id, user, vid)
			if err != nil {
				t.Fatal(err)
			}
			if tt.releasedOnce {
				if err := app.Gate.Return(ctx, []domain.VoucherOrder{o}); err != nil {
					t.Fatal(err)
				}
			}
			testenv.Eventually(t, 10*time.Second, func() (bool, string) {
				var returned bool
				err := app.DB.NewSelect().Table("tb_voucher_order").Column("returned").Where("id = ?", int64(id)).Scan(ctx, &returned)
				return err == nil && returned, fmt.Sprintf("returned = %v (%v)", returned, err)
			})
			stock, ok, err := app.Gate.Stock(ctx, vid)
			if err != nil || !ok || stock != 2 {
				t.Fatalf("gate stock %d (%v, %v), want 2: the unit back exactly once", stock, ok, err)
			}
			// Its buyer's place is forfeited; the unit is another buyer's.
			if env := claim(t, app, vid, login(t, app, user)); env.Success || env.Code != "duplicate" {
				t.Fatalf("the expired order's buyer claims again: %+v; want duplicate", env)
			}
			if env := claim(t, app, vid, login(t, app, user+1)); !env.Success {
				t.Fatalf("another buyer's claim: %+v", env)
			}
			if stock, _, _ := app.Gate.Stock(ctx, vid); stock != 1 {
				t.Fatalf("gate stock %d after the claim, want 1", stock)
			}
		})
	}
}
