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

			// New buyers, and the first five whose order expired, at once.
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
			for _, tok := range tokens {
				wg.Go(func() {
					<-start
					_, env := postJSON(t, http.DefaultClient, fmt.Sprintf("%s/voucher-order/seckill/%d", base, vid), tok, nil)
					mu.Lock()
					defer mu.Unlock()
					if env.Success {
						codes["success"]++
					} else {
						codes[env.Code]++
					}
				})
			}
			close(start)
			wg.Wait()
			if codes["success"] != returned || codes["success"]+codes["sold_out"] != len(tokens) {
				t.Fatalf("answers %v, want exactly %d successes, the rest sold_out", codes, returned)
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
		})
	}
}
