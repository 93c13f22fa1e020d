// Package e2e runs the built seckill binary as child processes against the
// real Redis and MySQL of the test environment, and kills them the hard way.
package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "seckill-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "seckill")
	build := exec.Command("go", "build", "-o", binary, "../../cmd/seckill")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build seckill:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// cluster is what one test shares between its service processes: one
// database, one Redis deployment (a node or a Redis Cluster), one key prefix.
type cluster struct {
	t      *testing.T
	env    []string
	rdb    redis.UniversalClient
	db     *bun.DB
	prefix string
}

// newCluster runs the services on the one Redis node of SECKILL_TEST_REDIS_URL.
func newCluster(t *testing.T, extra ...string) *cluster {
	t.Helper()
	return newClusterOn(t, testenv.RealRedis(t), "SECKILL_REDIS_URL="+os.Getenv(testenv.RedisEnv), extra...)
}

// newClusterOn runs the services on rdb, which redisEnv (the service's
// variable naming it) points them to.
func newClusterOn(t *testing.T, rdb redis.UniversalClient, redisEnv string, extra ...string) *cluster {
	t.Helper()
	dsn := testenv.MySQLDSN(t)
	db, err := mysqlstore.OpenMySQL(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	c := &cluster{t: t, rdb: rdb, db: db, prefix: testenv.KeyPrefix(t)}
	testenv.ForgetTokens(t, rdb) // the tokens mint writes
	c.env = append([]string{
		redisEnv,
		"SECKILL_MYSQL_DSN=" + dsn,
		"SECKILL_KEY_PREFIX=" + c.prefix,
		"SECKILL_LOG_LEVEL=info",
		"SECKILL_SHUTDOWN_TIMEOUT=10s",
		"SECKILL_ADMIN_USERS=" + strconv.Itoa(adminUID),
		// Every claim comes from loopback: the per-IP limit would throttle
		// the test's thousands of users as if they were one bot.
		"SECKILL_RATE_IP=0",
		"SECKILL_METRICS_ADDR=127.0.0.1:0",
	}, extra...)
	return c
}

// adminUID creates the tests' vouchers; no claiming user has this id.
const adminUID = 999

// proc is one running `seckill serve`.
type proc struct {
	name  string
	admin string // adminUID's login token
	cmd   *exec.Cmd
	base  string
	log   *testenv.LogBuffer
	done  chan struct{}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// baseEnv is the environment a service under test starts from: this
// process's, without any SECKILL_* variable, so a service is configured by
// the test alone. A developer's shell that sets SECKILL_REDIS_URL (to run
// the service, as the README says) made the Redis Cluster test's instances
// refuse to start with both it and SECKILL_REDIS_CLUSTER_ADDRS set.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECKILL_") {
			env = append(env, kv)
		}
	}
	return env
}

// start runs the service with the cluster's environment plus env, and waits
// until it is ready.
func (c *cluster) start(name string, env ...string) *proc {
	t := c.t
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(binary, "serve")
	cmd.Env = append(append(append(baseEnv(), c.env...), "SECKILL_HTTP_ADDR="+addr), env...)
	buf := &testenv.LogBuffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, base: "http://" + addr, log: buf, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("--- log of %s ---\n%s", name, lastLines(buf.String(), 40))
		}
	})
	p.admin = c.mint(1, adminUID)[0]
	testenv.Eventually(t, 30*time.Second, func() (bool, string) {
		select {
		case <-p.done:
			t.Fatalf("%s exited at start:\n%s", name, lastLines(buf.String(), 40))
		default:
		}
		resp, err := http.Get(p.base + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "readyz " + resp.Status
	})
	return p
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// kill9 kills the process with SIGKILL: no shutdown, no drain.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// stop sends SIGTERM and waits for the graceful shutdown.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop within 30s", p.name)
	}
}

type envelope struct {
	Success bool            `json:"success"`
	Code    string          `json:"code"`
	Data    json.RawMessage `json:"data"`
}

func call(t *testing.T, client *http.Client, method, url, token string, body any) (int, envelope) {
	t.Helper()
	var r io.Reader = http.NoBody
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, r)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("authorization", token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, envelope{}
	}
	defer resp.Body.Close()
	var env envelope
	_ = json.NewDecoder(resp.Body).Decode(&env)
	return resp.StatusCode, env
}

func (p *proc) createVoucher(t *testing.T, stock int) domain.VoucherID {
	t.Helper()
	now := time.Now().UTC()
	status, env := call(t, http.DefaultClient, http.MethodPost, p.base+"/voucher/seckill", p.admin, map[string]any{
		"shopId": 1, "title": "e2e", "payValue": 1, "actualValue": 2, "type": 1, "stock": stock,
		"beginTime": now.Add(-time.Minute).Format(time.RFC3339), "endTime": now.Add(time.Hour).Format(time.RFC3339),
	})
	var s string
	if status != http.StatusOK || !env.Success || json.Unmarshal(env.Data, &s) != nil {
		t.Fatalf("create voucher: %d %+v", status, env)
	}
	id, _ := strconv.ParseInt(s, 10, 64)
	return domain.VoucherID(id)
}

// mint makes n users with tokens, users first..first+n-1.
func (c *cluster) mint(n int, first domain.UserID) []string {
	c.t.Helper()
	store := redissession.New(c.rdb, redissession.Options{TTL: time.Hour})
	tokens := make([]string, n)
	for i := range tokens {
		tok, err := store.Mint(context.Background(), first+domain.UserID(i))
		if err != nil {
			c.t.Fatal(err)
		}
		tokens[i] = tok
	}
	return tokens
}

// claimAll has every token claim the voucher once, spread over the given
// processes, 64 at a time, and returns the order ids the users were told.
func claimAll(t *testing.T, procs []*proc, vid domain.VoucherID, tokens []string) map[int]domain.OrderID {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var (
		mu   sync.Mutex
		won  = map[int]domain.OrderID{}
		errs []string
		wg   sync.WaitGroup
	)
	work := make(chan int)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				p := procs[i%len(procs)]
				status, env := call(t, client, http.MethodPost, fmt.Sprintf("%s/voucher-order/seckill/%d", p.base, vid), tokens[i], nil)
				mu.Lock()
				if status == http.StatusOK && env.Success {
					var s string
					_ = json.Unmarshal(env.Data, &s)
					id, _ := strconv.ParseInt(s, 10, 64)
					won[i] = domain.OrderID(id)
				} else {
					errs = append(errs, fmt.Sprintf("user %d: %d %s", i, status, env.Code))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range tokens {
		work <- i
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d claims did not succeed, e.g. %v", len(errs), errs[:min(5, len(errs))])
	}
	return won
}

// books is what MySQL and Redis hold for a voucher.
type books struct {
	orders, users, dbStock int
	redisStock, buyers     int
	failures               int
}

func (c *cluster) books(vid domain.VoucherID) books {
	c.t.Helper()
	ctx := context.Background()
	var b books
	row := c.db.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT user_id) FROM tb_voucher_order WHERE voucher_id = ?", int64(vid))
	if err := row.Scan(&b.orders, &b.users); err != nil {
		c.t.Fatal(err)
	}
	if err := c.db.QueryRowContext(ctx, "SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?", int64(vid)).Scan(&b.dbStock); err != nil {
		c.t.Fatal(err)
	}
	if err := c.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM tb_voucher_order_failure WHERE voucher_id = ?", int64(vid)).Scan(&b.failures); err != nil {
		c.t.Fatal(err)
	}
	k := redisschema.KeysFor(c.prefix, vid)
	b.redisStock, _ = c.rdb.HGet(ctx, k.Voucher, "stock").Int()
	b.buyers = int(c.rdb.HLen(ctx, k.Buyers).Val())
	return b
}

// reconcile runs `seckill reconcile` with the cluster's environment.
func (c *cluster) reconcile(vid domain.VoucherID, args ...string) (string, error) {
	cmd := exec.Command(binary, append([]string{"reconcile", "--voucher", strconv.FormatInt(int64(vid), 10)}, args...)...)
	cmd.Env = append(baseEnv(), c.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
