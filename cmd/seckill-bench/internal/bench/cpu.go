package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// processCPU is the user plus system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendCPU is the CPU the local Redis and MySQL server processes have
// used, read from /proc: on a 2-core machine the backends compete with the
// service for the same cores, and their share explains a ceiling. Zero when
// the servers are not local processes (or /proc is not there).
type backendCPU struct {
	Redis time.Duration `json:"redis"`
	MySQL time.Duration `json:"mysql"`
	// Service is the CPU of the service when it runs as a child process
	// (the crash scenario); in-process modes count in the bench's own.
	Service time.Duration `json:"service,omitempty"`
	// LoadGen is wrk's CPU when it drives the load (set from its rusage
	// once it exits, not sampled).
	LoadGen time.Duration `json:"load_generator,omitempty"`
}

func (b backendCPU) since(a backendCPU) backendCPU {
	return backendCPU{Redis: b.Redis - a.Redis, MySQL: b.MySQL - a.MySQL, Service: b.Service - a.Service}
}

func (b backendCPU) total() time.Duration { return b.Redis + b.MySQL + b.Service + b.LoadGen }

func (e *env) backendCPU() backendCPU {
	var b backendCPU
	if !e.embeddedRedis {
		b.Redis = cpuOfProcesses("redis-server")
	}
	if !e.embeddedDB {
		b.MySQL = cpuOfProcesses("mariadbd", "mysqld")
	}
	if pid := e.childPID.Load(); pid > 0 {
		b.Service = cpuOfStat(fmt.Sprintf("/proc/%d/stat", pid), nil)
	}
	return b
}

// userHZ is the unit of /proc/<pid>/stat's times; Linux fixes it at 100 for
// user space whatever the kernel's tick rate.
const userHZ = 100

func cpuOfProcesses(names ...string) time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var total time.Duration
	for _, p := range stats {
		total += cpuOfStat(p, names)
	}
	return total
}

// cpuOfStat reads one /proc/<pid>/stat: the process's user plus system
// time, if its command is one of names (any command when names is nil).
func cpuOfStat(path string, names []string) time.Duration {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := string(raw)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return 0
	}
	if names != nil && !slices.Contains(names, s[open+1:closing]) {
		return 0
	}
	// Fields after the command: state is field 3; utime and stime are 14 and 15.
	f := strings.Fields(s[closing+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * time.Second / userHZ
}

// systemBusy is the CPU time every process on the machine has used (busy
// time from /proc/stat: all but idle and iowait). Set against this process's
// and the backends' share, it tells how much of a run's machine went to
// something else (another test suite, a build), which makes its numbers
// unreliable.
func systemBusy() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0
		}
		// user nice system idle iowait irq softirq steal guest guest_nice;
		// guest time is already counted in user.
		if i == 3 || i == 4 || i >= 8 {
			continue
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / userHZ
}

// tripCounter counts a Redis client's round trips (a pipeline is one), so
// the report can show what a claim costs in Redis calls: the bound set for it
// is 2 on a user's first claim and 1 on a repeat, against the original's 4.
type tripCounter struct{ n atomic.Int64 }

func countTrips(rdb redis.UniversalClient) *tripCounter {
	c := &tripCounter{}
	rdb.AddHook(c)
	return c
}

func (c *tripCounter) load() int64 {
	if c == nil {
		return 0
	}
	return c.n.Load()
}

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}
