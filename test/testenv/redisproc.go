package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisProc is a redis-server process a test started for itself, so that it
// can kill it (SIGKILL), stall it (SIGSTOP) and start it again: the faults a
// shared server must never suffer. It keeps nothing on disk unless args ask.
type RedisProc struct {
	t    testing.TB
	Port int
	dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// redisBinaries are needed by the process-owning tests; CI installs them with
// the server (.ci/run), elsewhere their absence skips the test.
func redisBinaries(t testing.TB) {
	t.Helper()
	SkipOwnClock(t)
	for _, b := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(b); err != nil {
			if CI() {
				t.Fatalf("%s is not on PATH: CI=true requires it", b)
			}
			t.Skipf("%s is not on PATH; skipping a test that runs its own Redis", b)
		}
	}
}

// StartRedis starts a standalone redis-server on a free loopback port. It is
// killed when the test ends.
func StartRedis(t testing.TB, args ...string) *RedisProc {
	t.Helper()
	redisBinaries(t)
	p := &RedisProc{t: t, Port: freePortPair(t), dir: t.TempDir(), args: args}
	p.start()
	t.Cleanup(p.kill)
	return p
}

// Addr is host:port.
func (p *RedisProc) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.Port) }

// URL is the redis:// URL of database 0.
func (p *RedisProc) URL() string { return "redis://" + p.Addr() + "/0" }

func (p *RedisProc) start() {
	t := p.t
	t.Helper()
	args := append([]string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(p.Port), "--dir", p.dir,
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(p.dir, "redis.log"),
	}, p.args...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	done := p.done
	go func() { _ = cmd.Wait(); close(done) }()
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	defer c.Close()
	Eventually(t, 10*time.Second, func() (bool, string) {
		select {
		case <-done:
			t.Fatalf("redis-server on %d exited at start: %s", p.Port, p.Log())
		default:
		}
		err := c.Ping(context.Background()).Err()
		return err == nil, fmt.Sprint(err)
	})
}

// Log is the server's log, for a failure message.
func (p *RedisProc) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "redis.log"))
	return lastLines(string(b), 30)
}

// Kill9 kills the server with SIGKILL and waits for it to be gone: nothing
// it held in memory survives, and its connections are cut.
func (p *RedisProc) Kill9() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies only once resumed
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatalf("kill redis on %d: %v", p.Port, err)
	}
	<-p.done
}

// Stall stops the process (SIGSTOP): it holds its connections and answers
// nothing, like a server swapping or frozen by its host, until Resume.
func (p *RedisProc) Stall() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.t.Fatalf("stop redis on %d: %v", p.Port, err)
	}
}

// Resume undoes Stall.
func (p *RedisProc) Resume() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		p.t.Fatalf("resume redis on %d: %v", p.Port, err)
	}
}

// Restart starts the server again on the same port after Kill9: empty, as a
// Redis that keeps nothing on disk comes back.
func (p *RedisProc) Restart() {
	p.t.Helper()
	p.start()
}

func (p *RedisProc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Client is a plain client of this one node, closed when the test ends.
func (p *RedisProc) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: 2 * time.Second})
	p.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Info reads one field of INFO (e.g. "role", "master_link_status").
func (p *RedisProc) Info(field string) string {
	return p.read(field, func(ctx context.Context, c *redis.Client) (string, error) { return c.Info(ctx).Result() })
}

func (p *RedisProc) clusterInfo(field string) string {
	return p.read(field, func(ctx context.Context, c *redis.Client) (string, error) { return c.ClusterInfo(ctx).Result() })
}

// read fetches an INFO-shaped reply ("field:value" lines) and picks field;
// "" when the node does not answer.
func (p *RedisProc) read(field string, fetch func(context.Context, *redis.Client) (string, error)) string {
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: time.Second})
	defer c.Close()
	s, err := fetch(context.Background(), c)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// StartReplicated starts a master and one replica of it, and returns once
// the replica's link is up and the master counts its acknowledgements (a
// WAIT for one replica answers 1): a link just up may not have acknowledged
// anything yet, and a test's first WAIT with a short timeout would fail on
// a loaded machine.
func StartReplicated(t testing.TB) (master, replica *RedisProc) {
	t.Helper()
	master = StartRedis(t)
	replica = StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	Eventually(t, 20*time.Second, func() (bool, string) {
		st := replica.Info("master_link_status")
		return st == "up", "replica link " + st
	})
	rdb := master.Client()
	Eventually(t, 20*time.Second, func() (bool, string) {
		n, err := rdb.Wait(context.Background(), 1, time.Second).Result()
		return err == nil && n == 1, fmt.Sprintf("WAIT 1: %d replicas, %v", n, err)
	})
	return master, replica
}

// freePortPair finds a loopback port that is free together with its cluster
// bus port (port + 10000).
func freePortPair(t testing.TB) int {
	t.Helper()
	for range 200 {
		port := 20000 + rand.IntN(20000)
		if free(port) && free(port+10000) {
			return port
		}
	}
	t.Fatal("no free port pair for a redis-server")
	return 0
}

func free(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// OwnCluster is a Redis Cluster of redis-server processes this test started:
// masters with replicas, to kill a master and watch its replica take over.
type OwnCluster struct {
	t     testing.TB
	Nodes []*RedisProc
}

// StartRedisCluster starts masters×(1+replicas) nodes with
// cluster-node-timeout nodeTimeout and creates the cluster over them
// (redis-cli --cluster create). It returns once every node says
// cluster_state:ok and every replica's link to its master is up.
func StartRedisCluster(t testing.TB, masters, replicas int, nodeTimeout time.Duration, args ...string) *OwnCluster {
	t.Helper()
	redisBinaries(t)
	c := &OwnCluster{t: t}
	n := masters * (1 + replicas)
	addrs := make([]string, n)
	for i := range n {
		p := &RedisProc{t: t, Port: freePortPair(t), dir: t.TempDir(), args: append([]string{
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
		}, args...)}
		p.start()
		t.Cleanup(p.kill)
		c.Nodes = append(c.Nodes, p)
		addrs[i] = p.Addr()
	}
	create := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, addrs...),
		"--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	Eventually(t, 30*time.Second, func() (bool, string) {
		for _, p := range c.Nodes {
			if st := p.clusterInfo("cluster_state"); st != "ok" {
				return false, fmt.Sprintf("node %d: cluster_state %q", p.Port, st)
			}
			if p.Info("role") == "slave" && p.Info("master_link_status") != "up" {
				return false, fmt.Sprintf("replica %d: link %s", p.Port, p.Info("master_link_status"))
			}
		}
		return true, ""
	})
	return c
}

// Seeds is the node list for SECKILL_REDIS_CLUSTER_ADDRS.
func (c *OwnCluster) Seeds() string {
	s := make([]string, len(c.Nodes))
	for i, p := range c.Nodes {
		s[i] = p.Addr()
	}
	return strings.Join(s, ",")
}

// Client is a cluster client of it, closed when the test ends.
func (c *OwnCluster) Client() *redis.ClusterClient {
	addrs := strings.Split(c.Seeds(), ",")
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: time.Second,
		ReadTimeout: 2 * time.Second, ClusterStateReloadInterval: time.Second})
	c.t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// MasterOf is the node that serves key's slot now, as the live nodes say.
func (c *OwnCluster) MasterOf(key string) *RedisProc {
	c.t.Helper()
	slot, addr := c.route(key)
	if addr == "" {
		c.t.Fatalf("no live node knows the master of slot %d", slot)
	}
	return c.node(addr)
}

// ReplicaOf is a replica that follows master now.
func (c *OwnCluster) ReplicaOf(master *RedisProc) *RedisProc {
	c.t.Helper()
	for _, p := range c.Nodes {
		if p != master && p.Info("role") == "slave" && p.Info("master_port") == strconv.Itoa(master.Port) {
			return p
		}
	}
	c.t.Fatalf("no replica follows %s", master.Addr())
	return nil
}

// WaitMasterChange waits until a node other than old serves key's slot and
// the cluster says ok, and returns the new master.
func (c *OwnCluster) WaitMasterChange(key string, old *RedisProc, within time.Duration) *RedisProc {
	c.t.Helper()
	var now *RedisProc
	Eventually(c.t, within, func() (bool, string) {
		_, addr := c.route(key)
		if addr == "" || addr == old.Addr() {
			return false, "slot still on " + old.Addr()
		}
		now = c.node(addr)
		if st := now.clusterInfo("cluster_state"); st != "ok" {
			return false, "new master says cluster_state " + st
		}
		return true, ""
	})
	return now
}

// route asks a live node for key's slot and the address of its master.
func (c *OwnCluster) route(key string) (slot int, master string) {
	for _, p := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: 300 * time.Millisecond,
			ReadTimeout: 300 * time.Millisecond})
		ctx := context.Background()
		s, err := cl.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			_ = cl.Close()
			continue
		}
		slots, err := cl.ClusterSlots(ctx).Result()
		_ = cl.Close()
		if err != nil {
			continue
		}
		for _, r := range slots {
			if int64(r.Start) <= s && s <= int64(r.End) && len(r.Nodes) > 0 {
				return int(s), r.Nodes[0].Addr
			}
		}
		return int(s), ""
	}
	return -1, ""
}

func (c *OwnCluster) node(addr string) *RedisProc {
	for _, p := range c.Nodes {
		if p.Addr() == addr {
			return p
		}
	}
	c.t.Fatalf("%s is not a node of this cluster", addr)
	return nil
}
