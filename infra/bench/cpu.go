package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
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
}

func (b backendCPU) since(a backendCPU) backendCPU {
	return backendCPU{Redis: b.Redis - a.Redis, MySQL: b.MySQL - a.MySQL}
}

func (e *env) backendCPU() backendCPU {
	var b backendCPU
	if !e.embeddedRedis {
		b.Redis = cpuOfProcesses("redis-server")
	}
	if !e.embeddedDB {
		b.MySQL = cpuOfProcesses("mariadbd", "mysqld")
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
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(raw)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		comm := s[open+1 : closing]
		match := false
		for _, n := range names {
			if comm == n {
				match = true
			}
		}
		if !match {
			continue
		}
		// Fields after the command: state is field 3; utime and stime are 14 and 15.
		f := strings.Fields(s[closing+1:])
		if len(f) < 13 {
			continue
		}
		ut, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		total += time.Duration(ut+st) * time.Second / userHZ
	}
	return total
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
