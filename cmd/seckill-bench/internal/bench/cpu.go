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

// A run's CPU is accounted per process over a window (the load and, for
// the modes that write MySQL, its drain): the serving process (this one for
// an in-process service, else the child that serves), Redis, MySQL and wrk.
// On a shared 2-core machine the CPU per claim of each process is the robust
// figure: another workload slows a run down, but hardly changes what a claim
// costs each process.

// cpuSample is what the processes of interest had used up to a moment.
type cpuSample struct {
	at time.Time
	// self is this process (rusage: exact); the others are read from
	// /proc/<pid>/stat in ticks of 10 ms.
	self  time.Duration
	child time.Duration
	// childPID is the serving child process at the sample (0: none).
	childPID     int64
	redis, mysql time.Duration
	// busy is the CPU every process on the machine had used (/proc/stat).
	busy time.Duration
}

func (e *env) sample() cpuSample {
	s := cpuSample{at: time.Now(), self: processCPU(), busy: systemBusy()}
	if !e.embeddedRedis {
		s.redis = e.redisCPU()
	}
	if !e.embeddedDB {
		s.mysql = cpuOfPIDs(e.mysqlPIDs)
	}
	if pid := e.childPID.Load(); pid > 0 {
		s.childPID = pid
		s.child = cpuOfThreads(int(pid))
	}
	return s
}

// cpuWindow is what each process used between two samples, each bounded by
// what the machine's cores can give in that time: a figure above it is a
// reading error (a sample a tick apart, a process that came or went), never
// a process that was busier than the machine.
type cpuWindow struct {
	Wall  time.Duration
	Cores int
	// Self is this process; Child the serving child, when the same one ran
	// at both samples (else zero: not measured).
	Self, Child, Redis, MySQL, LoadGen time.Duration
	ChildServes                        bool
	Busy                               time.Duration
}

func windowOf(a, b cpuSample, loadGen time.Duration, cores int) cpuWindow {
	w := cpuWindow{Wall: b.at.Sub(a.at), Cores: max(cores, 1)}
	w.Self = w.bound(b.self - a.self)
	w.Redis = w.bound(b.redis - a.redis)
	w.MySQL = w.bound(b.mysql - a.mysql)
	w.LoadGen = w.bound(loadGen)
	w.Busy = w.bound(b.busy - a.busy)
	if a.childPID > 0 && a.childPID == b.childPID {
		w.ChildServes = true
		w.Child = w.bound(b.child - a.child)
	}
	return w
}

// bound clamps d to [0, Wall × Cores].
func (w cpuWindow) bound(d time.Duration) time.Duration {
	return min(max(d, 0), w.Wall*time.Duration(w.Cores))
}

// CPUCost is a run's CPU per request (per order in fulfil) of each process,
// over the window, in µs.
type CPUCost struct {
	WindowSeconds float64 `json:"window_seconds"`
	Requests      int     `json:"requests"`
	// Service is the serving process: the bench process for an in-process
	// service or handler (with --load inproc it holds the load generator
	// too: LoadGenInService), else the child process that serves.
	Service          float64 `json:"service_us"`
	LoadGenInService bool    `json:"load_generator_in_service,omitempty"`
	Redis            float64 `json:"redis_us"`
	MySQL            float64 `json:"mysql_us"`
	LoadGen          float64 `json:"load_generator_us"`
	// Bench is this process's own CPU while a child serves (it polls MySQL
	// during the drain).
	Bench float64 `json:"bench_us,omitempty"`
	// Total is the sum of the above.
	Total float64 `json:"total_us"`
	// BusyCores is how many of the machine's cores were busy on average
	// (every process); OtherCores how many of those went to processes not
	// accounted above (another workload on the machine).
	BusyCores  float64 `json:"busy_cores"`
	OtherCores float64 `json:"other_cores"`
	Cores      int     `json:"cores"`
}

// minShareWindow is the shortest window whose shares of the machine the
// report states: /proc counts in ticks of 10 ms per process, so over a
// window of a few ticks a share can be off by more than itself.
const minShareWindow = 500 * time.Millisecond

// costOf spreads a window over its n requests. inproc says the load
// generator runs in this process.
func costOf(w cpuWindow, n int, inproc bool) CPUCost {
	c := CPUCost{WindowSeconds: w.Wall.Seconds(), Requests: n, Cores: w.Cores}
	if n <= 0 || w.Wall <= 0 {
		return c
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	service, bench := w.Self, time.Duration(0)
	if w.ChildServes {
		service, bench = w.Child, w.Self
	}
	c.Service, c.Bench = us(service), us(bench)
	c.LoadGenInService = inproc && !w.ChildServes
	c.Redis, c.MySQL, c.LoadGen = us(w.Redis), us(w.MySQL), us(w.LoadGen)
	c.Total = c.Service + c.Bench + c.Redis + c.MySQL + c.LoadGen
	accounted := w.bound(service + bench + w.Redis + w.MySQL + w.LoadGen)
	c.BusyCores = w.Busy.Seconds() / w.Wall.Seconds()
	c.OtherCores = max(0, w.Busy-accounted).Seconds() / w.Wall.Seconds()
	return c
}

// sharesKnown tells whether the window was long enough for its shares of
// the machine to mean something.
func (c CPUCost) sharesKnown() bool {
	return c.WindowSeconds >= minShareWindow.Seconds()
}

// settle accounts the run's CPU from the load's start until now: the load
// and whatever drain followed.
func (e *env) settle(r *Result, o *loadOutcome) {
	c := costOf(windowOf(o.cpu0, e.sample(), o.loadGen, e.cores), o.sent, e.opts.Load == LoadInproc)
	r.CPU = &c
}

// disturbed is the share of the machine that went to other processes
// during the run, when the window was long enough to tell (else 0).
func (r *Result) disturbed() float64 {
	if c := r.CPU; c != nil && c.sharesKnown() && c.Cores > 0 {
		return c.OtherCores / float64(c.Cores)
	}
	return 0
}

// processCPU is the user plus system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// userHZ is the unit of /proc/<pid>/stat's times; Linux fixes it at 100 for
// user space whatever the kernel's tick rate.
const userHZ = 100

// redisServerPIDs finds the local Redis server process: Redis says its own
// pid, so a Redis Cluster on the same machine is not counted as the Redis
// under test; by name when that pid is not a local redis-server. self says
// the pid is the one Redis reported, so its own CPU figures are that
// process's.
func redisServerPIDs(ctx context.Context, rdb *redis.Client) (pids []int, self bool) {
	if v, ok := infoField(ctx, rdb, "server", "process_id"); ok {
		if pid, err := strconv.Atoi(v); err == nil && isProcess(pid, "redis-server") {
			return []int{pid}, true
		}
	}
	return pidsNamed("redis-server"), false
}

// redisCPU is what the Redis under test has used. When Redis is the local
// process it says it is, its INFO cpu (its own getrusage, in µs) is read:
// /proc counts in ticks of 10 ms, and a short run costs Redis less than a
// tick. Else, or if INFO fails, the processes' ticks.
func (e *env) redisCPU() time.Duration {
	if e.redisSelf {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		sys, ok1 := infoSeconds(ctx, e.rdb, "used_cpu_sys")
		user, ok2 := infoSeconds(ctx, e.rdb, "used_cpu_user")
		if ok1 && ok2 {
			return sys + user
		}
	}
	return cpuOfPIDs(e.redisPIDs)
}

func infoSeconds(ctx context.Context, rdb *redis.Client, field string) (time.Duration, bool) {
	v, ok := infoField(ctx, rdb, "cpu", field)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// infoField reads one field of a section of Redis's INFO.
func infoField(ctx context.Context, rdb *redis.Client, section, field string) (string, bool) {
	info, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v, true
		}
	}
	return "", false
}

func isProcess(pid int, names ...string) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(raw)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	return open >= 0 && closing > open && slices.Contains(names, s[open+1:closing])
}

func pidsNamed(names ...string) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, p := range stats {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil && isProcess(pid, names...) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cpuOfThreads is what a process's threads have run, summed from their
// /proc/<pid>/task/<tid>/schedstat (nanoseconds): /proc/<pid>/stat counts
// in ticks of 10 ms, and a short run costs the serving child less than a
// tick. It suits a process whose threads live as long as it does (the
// serving child, a Go program: a thread that exits takes its time with it);
// when the kernel keeps no schedstat it falls back to the ticks.
func cpuOfThreads(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/[0-9]*/schedstat", pid))
	var total time.Duration
	for _, p := range tasks {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimSpace(string(raw)), " ")
		ns, err := strconv.ParseInt(first, 10, 64)
		if err != nil {
			continue
		}
		total += time.Duration(ns)
	}
	if total == 0 {
		return cpuOfStat(fmt.Sprintf("/proc/%d/stat", pid), nil)
	}
	return total
}

func cpuOfPIDs(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		total += cpuOfStat(fmt.Sprintf("/proc/%d/stat", pid), nil)
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
	return parseStat(string(raw), names)
}

func parseStat(s string, names []string) time.Duration {
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
// time from /proc/stat: all but idle and iowait). Set against the accounted
// processes' share, it tells how much of a run's machine went to something
// else (another test suite, a build), which disturbs its claims/s.
func systemBusy() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	return parseSystemBusy(line)
}

func parseSystemBusy(line string) time.Duration {
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

// loadAverage is /proc/loadavg's first three fields ("" when unreadable).
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
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
