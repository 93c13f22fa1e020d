package redissession_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestMeasureWarmUp measures the warm-up's cost on a redis-server of its
// own (so that no other load is counted): how fast it reads sessions, the
// commands it sends, and the CPU Redis spends on it, unpaced and at the
// default pace. It runs only with SECKILL_MEASURE_WARM=<sessions>.
func TestMeasureWarmUp(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SECKILL_MEASURE_WARM"))
	if n <= 0 {
		t.Skip("set SECKILL_MEASURE_WARM=<sessions> to measure the warm-up")
	}
	rdb := ownRedis(t)
	ctx := context.Background()
	prefix := redissession.DefaultPrefix
	for i := 0; i < n; i += 1000 {
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j := i; j < min(i+1000, n); j++ {
				key := prefix + redissession.NewToken()
				p.HSet(ctx, key, "id", j+1, "nickName", fmt.Sprint("user_", j+1), "icon", "")
				p.Expire(ctx, key, time.Hour)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, duty := range []float64{1, redissession.DefaultWarmDuty} {
		store := redissession.New(rdb, redissession.Options{})
		tr, err := redissession.NewSessions(ctx, rdb, store, redissession.WithWarmDuty(redissession.CacheOptions{Size: n, NoPrefetch: true}, duty))
		if err != nil {
			t.Fatal(err)
		}
		cpu0 := redisCPU(t, rdb)
		began := time.Now()
		tr.Warm()
		select {
		case <-tr.WarmedUp():
		case <-time.After(5 * time.Minute):
			t.Fatalf("not warmed: %+v", tr.WarmProgress())
		}
		took := time.Since(began)
		cpu := redisCPU(t, rdb) - cpu0
		p := tr.WarmProgress()
		_ = tr.Close()
		cmds := p.Scans + 2*p.Read
		t.Logf("duty %.2f: %d sessions cached (%d read) in %s = %.0f sessions/s; %d SCAN + %d HGET + %d PTTL = %d commands (%.2f per session); Redis CPU %s (%.2f µs per session, %.1f%% of the warm-up's time)",
			duty, p.Cached, p.Read, took.Round(time.Millisecond), float64(p.Cached)/took.Seconds(), p.Scans, p.Read, p.Read, cmds,
			float64(cmds)/float64(p.Cached), cpu.Round(time.Millisecond), float64(cpu.Microseconds())/float64(p.Cached), 100*cpu.Seconds()/took.Seconds())
		if p.Cached != int64(n) {
			t.Errorf("cached %d of %d", p.Cached, n)
		}
	}
}

// ownRedis starts a redis-server on a free port for this test alone.
func ownRedis(t *testing.T) *redis.Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Skipf("no redis-server to start: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	t.Cleanup(func() { _ = rdb.Close() })
	testenv.Eventually(t, 5*time.Second, func() (bool, string) {
		err := rdb.Ping(context.Background()).Err()
		return err == nil, fmt.Sprint(err)
	})
	return rdb
}

// redisCPU is the CPU time the server has used (user and system).
func redisCPU(t *testing.T, rdb *redis.Client) time.Duration {
	t.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}
