package infra

import (
	"strings"
	"syscall"
	"testing"
)

// TestMaxConnsIsDerivedFromTheFileLimit: the API's connection cap leaves the
// Redis pools, the metrics listener's cap and a reserve of the file limit
// to the rest of the process,
// and a set SECKILL_HTTP_MAX_CONNS wins.
func TestMaxConnsIsDerivedFromTheFileLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   func(*Config)
		files uint64
		want  int
	}{
		{name: "set_explicitly", set: func(c *Config) { c.HTTPMaxConns = 500 }, files: 20000, want: 500},
		{name: "one_redis_node", set: func(*Config) {}, files: 20000, want: 20000 - fileReserve - metricsMaxConns - 128},
		{name: "cluster_counts_three_masters_at_least", set: func(c *Config) { c.RedisClusterAddrs = []string{"a:1"} }, files: 20000, want: 20000 - fileReserve - metricsMaxConns - 3*128},
		{name: "huge_limit_is_bounded_by_memory", set: func(*Config) {}, files: 1 << 20, want: maxDerivedConns},
		{name: "unknown_limit", set: func(*Config) {}, files: 0, want: maxDerivedConns},
		{name: "tiny_limit_keeps_half", set: func(*Config) {}, files: 1024, want: 512},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.set(&c)
			if got := c.maxConns(tc.files); got != tc.want {
				t.Fatalf("maxConns(%d) = %d, want %d", tc.files, got, tc.want)
			}
		})
	}
}

func TestConfigRefusesABadConnectionCap(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{name: "negative", value: "-1", want: "SECKILL_HTTP_MAX_CONNS: must be 0"},
		{name: "too_small_to_serve", value: "10", want: "SECKILL_HTTP_MAX_CONNS: must be 0"},
		{name: "not_a_number", value: "lots", want: "SECKILL_HTTP_MAX_CONNS: want a whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfigFrom(map[string]string{"SECKILL_HTTP_MAX_CONNS": tc.value})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SECKILL_HTTP_MAX_CONNS=%s: err %v, want %q", tc.value, err, tc.want)
			}
		})
	}
	if c, err := LoadConfigFrom(map[string]string{"SECKILL_HTTP_MAX_CONNS": "64"}); err != nil || c.HTTPMaxConns != 64 {
		t.Fatalf("64: %v %d", err, c.HTTPMaxConns)
	}
}

// TestRaiseFileLimitLiftsTheSoftLimitToTheHardOne lowers this process's soft
// limit (to a value far above what the package's tests open), then raises it
// back as `seckill serve` does at start.
func TestRaiseFileLimitLiftsTheSoftLimitToTheHardOne(t *testing.T) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Skip(err)
	}
	if l.Max < 4096 || l.Max == ^uint64(0) {
		t.Skipf("hard limit %d leaves no room to lower the soft one", l.Max)
	}
	lowered := l
	lowered.Cur = 2048
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l) })
	got, err := RaiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	if got != uint64(l.Max) || fileLimit() != uint64(l.Max) {
		t.Fatalf("after raising: reported %d, in force %d, want the hard limit %d", got, fileLimit(), l.Max)
	}
}
