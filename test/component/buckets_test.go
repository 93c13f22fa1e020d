package component_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

func createSplitVoucher(t *testing.T, app *infra.App, stock, buckets int) domain.VoucherID {
	t.Helper()
	token, err := redissession.New(app.Redis, redissession.Options{TTL: time.Hour}).Mint(context.Background(), adminUID)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	status, env := postJSON(t, http.DefaultClient, "http://"+app.Addr()+"/voucher/seckill", token, map[string]any{
		"shopId": 1, "title": "split", "payValue": 100, "actualValue": 1000, "type": 1,
		"stock": stock, "buckets": buckets, "beginTime": now.Add(-time.Minute).Format(time.RFC3339),
		"endTime": now.Add(time.Hour).Format(time.RFC3339),
	})
	if status != http.StatusOK || !env.Success {
		t.Fatalf("create voucher: %d %+v", status, env)
	}
	var s string
	if err := json.Unmarshal(env.Data, &s); err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.ParseInt(s, 10, 64)
	return domain.VoucherID(id)
}

// TestSplitVoucherThroughTheService: a voucher created over HTTP with
// "buckets": 3 on the cluster, a stampede through HTTP, a bucket lost while
// the service runs and repaired from MySQL, and the books exact at the end:
// MySQL and the gate agree (reconcile), the stock sold exactly once per user.
func TestSplitVoucherThroughTheService(t *testing.T) {
	const stock, users, firstUID = 300, 800, 2_000_000
	app, base := startServiceOn(t, infra.QueueStream, "redis_cluster", func(c *infra.Config) {
		c.RestoreInterval = 100 * time.Millisecond
	})
	ctx := context.Background()
	vid := createSplitVoucher(t, app, stock, 3)
	if v, err := mysqlstore.NewVoucherRepo(app.DB).Get(ctx, vid); err != nil || v.Sale().Buckets() != 3 {
		t.Fatalf("MySQL's voucher: buckets %d, %v", v.Sale().Buckets(), err)
	}
	if k, err := app.Redis.Get(ctx, redisschema.BucketMeta(app.Config.KeyPrefix, vid)).Int(); err != nil || k != 3 {
		t.Fatalf("Redis's K: %d, %v", k, err)
	}
	sessions := redissession.New(app.Redis, redissession.Options{TTL: time.Hour})
	tokens := make([]string, users)
	for i := range tokens {
		tok, err := sessions.Mint(ctx, domain.UserID(firstUID+i))
		if err != nil {
			t.Fatal(err)
		}
		tokens[i] = tok
	}
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: stampedeConns, MaxIdleConnsPerHost: stampedeConns}, Timeout: time.Minute}
	tally := newClaimTally(t, client, base, fmt.Sprintf("%s/voucher-order/seckill/%d", base, vid), tokens)
	// First wave: 100 users, one after another, then lose a bucket.
	for i := 0; i < 100; i++ {
		tally.settle(i)
	}
	tally.resolve()
	won := tally.won
	testenv.Eventually(t, 30*time.Second, func() (bool, string) {
		var n int
		err := app.DB.NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*)").Where("voucher_id = ?", vid).Scan(ctx, &n)
		return err == nil && n == len(won), fmt.Sprintf("%d of %d orders in MySQL (%v)", n, len(won), err)
	})
	// Bucket 1's master loses its data; the running service repairs it.
	bk := redisschema.KeysForTag(app.Config.KeyPrefix, redisschema.BucketTag(vid, 1, 3))
	for _, key := range []string{bk.Voucher, bk.Buyers, bk.Orders, bk.Transfers(), bk.Applied()} {
		if err := app.Redis.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() (bool, string) {
		v, err := app.Redis.HMGet(ctx, bk.Voucher, "stock", "frozen").Result()
		return err == nil && v[0] != nil && v[1] == nil, fmt.Sprintf("bucket 1: %v (%v)", v, err)
	})
	// Everyone who won before still holds the order: a second claim is a duplicate.
	for _, i := range slices.Sorted(maps.Keys(won)) {
		if env := tally.settle(i); env.Code != "duplicate" {
			t.Fatalf("user %d claimed again after the repair: %+v", i, env)
		}
	}
	// Second wave: every user twice at once.
	tally.stampede(2)
	if len(won) != stock {
		t.Fatalf("%d users hold an order, want exactly %d (refusals %v)", len(won), stock, tally.codes)
	}
	testenv.Eventually(t, 60*time.Second, func() (bool, string) {
		var n int
		err := app.DB.NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*)").Where("voucher_id = ?", vid).Scan(ctx, &n)
		return err == nil && n == stock, fmt.Sprintf("%d of %d orders in MySQL (%v)", n, stock, err)
	})
	v, err := mysqlstore.NewVoucherRepo(app.DB).Get(ctx, vid)
	if err != nil || v.Sale().Stock() != 0 {
		t.Fatalf("MySQL stock %d after the sale (%v)", v.Sale().Stock(), err)
	}
	buyers, err := mysqlstore.NewOrderRepo(app.DB).Buyers(ctx, vid)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range buyers {
		u, id := int(o.UserID())-firstUID, strconv.FormatInt(int64(o.ID()), 10)
		if won[u] != id {
			t.Fatalf("MySQL order %s is not the one its user holds (%q)", o, won[u])
		}
	}
	for b := range 3 {
		k := redisschema.KeysForTag(app.Config.KeyPrefix, redisschema.BucketTag(vid, b, 3))
		if s, err := app.Redis.HGet(ctx, k.Voucher, "stock").Int(); err != nil || s != 0 {
			t.Fatalf("bucket %d holds %d (%v)", b, s, err)
		}
	}
	rec, cleanup, err := infra.BuildReconcile(app.Config, app.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	r, err := rec.Check(ctx, vid)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Consistent() || r.Pending != 0 {
		t.Fatalf("reconcile: %+v", r)
	}
}

// TestRunningServiceRestoresAWholeSplitVoucher: Redis loses every key of a
// split voucher (its K, all buckets, the live-set entries); the periodic
// repair rebuilds it from MySQL, K included: the buckets hold MySQL's
// remaining stock between them, the buyers are refused a second order, and
// the rest sells exactly.
func TestRunningServiceRestoresAWholeSplitVoucher(t *testing.T) {
	const stock, firstUID = 30, 3_000_000
	app, base := startServiceOn(t, infra.QueueStream, "redis_cluster", func(c *infra.Config) {
		c.RestoreInterval = 100 * time.Millisecond
	})
	ctx := context.Background()
	vid := createSplitVoucher(t, app, stock, 3)
	sessions := redissession.New(app.Redis, redissession.Options{TTL: time.Hour})
	claim := func(u int) envelope {
		tok, err := sessions.Mint(ctx, domain.UserID(u))
		if err != nil {
			t.Fatal(err)
		}
		_, env := postJSON(t, http.DefaultClient, fmt.Sprintf("%s/voucher-order/seckill/%d", base, vid), tok, nil)
		return env
	}
	// The setup's sales: a claim answered busy (the repair loop, every
	// 100 ms, may be checking the new voucher's buckets) changed nothing and
	// is pressed again, as its Retry-After says.
	for u := firstUID; u < firstUID+10; u++ {
		testenv.Eventually(t, 5*time.Second, func() (bool, string) {
			env := claim(u)
			if !env.Success && env.Code != "busy" {
				t.Fatalf("claim of user %d: %+v", u, env)
			}
			return env.Success, fmt.Sprintf("claim of user %d: %+v", u, env)
		})
	}
	testenv.Eventually(t, 30*time.Second, func() (bool, string) {
		var n int
		err := app.DB.NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*)").Where("voucher_id = ?", vid).Scan(ctx, &n)
		return err == nil && n == 10, fmt.Sprintf("%d of 10 orders in MySQL (%v)", n, err)
	})

	live := redisschema.LiveSet(app.Config.KeyPrefix)
	if err := app.Redis.Del(ctx, redisschema.BucketMeta(app.Config.KeyPrefix, vid)).Err(); err != nil {
		t.Fatal(err)
	}
	for b := range 3 {
		tag := redisschema.BucketTag(vid, b, 3)
		bk := redisschema.KeysForTag(app.Config.KeyPrefix, tag)
		for _, key := range []string{bk.Voucher, bk.Buyers, bk.Transfers(), bk.Applied()} {
			if err := app.Redis.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := app.Redis.SRem(ctx, live, tag).Err(); err != nil {
			t.Fatal(err)
		}
	}
	sum := func() (int, string) {
		total, state := 0, ""
		for b := range 3 {
			bk := redisschema.KeysForTag(app.Config.KeyPrefix, redisschema.BucketTag(vid, b, 3))
			v, err := app.Redis.HMGet(ctx, bk.Voucher, "stock", "frozen").Result()
			if err != nil || v[0] == nil || v[1] != nil {
				return -1, fmt.Sprintf("bucket %d: %v %v", b, v, err)
			}
			n, _ := strconv.Atoi(v[0].(string))
			total += n
			state += fmt.Sprintf(" %d", n)
		}
		return total, state
	}
	testenv.Eventually(t, 30*time.Second, func() (bool, string) {
		n, state := sum()
		return n >= 0, state
	})
	if n, state := sum(); n != stock-10 {
		t.Fatalf("restored buckets hold %d (%s), want MySQL's %d", n, state, stock-10)
	}
	if k, err := app.Redis.Get(ctx, redisschema.BucketMeta(app.Config.KeyPrefix, vid)).Int(); err != nil || k != 3 {
		t.Fatalf("K after the restore: %d, %v", k, err)
	}
	for u := firstUID; u < firstUID+10; u++ {
		if env := claim(u); env.Success || env.Code != "duplicate" {
			t.Fatalf("buyer %d claimed again after the restore: %+v", u, env)
		}
	}
	sold := 0
	for u := firstUID + 10; u < firstUID+100; u++ {
		if env := claim(u); env.Success {
			sold++
		}
	}
	if sold != stock-10 {
		t.Fatalf("sold %d after the restore, want %d", sold, stock-10)
	}
}
