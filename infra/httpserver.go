package infra

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"
)

// MaxHeaderBytes bounds a request's header. Go's default, 1 MiB, let 800
// connections sending unfinished 1 MiB headers grow the process from 29 MB
// to 3.4 GB; the hmdp page sends well under 1 KiB. Over it: 431.
const MaxHeaderBytes = 16 << 10

// Bounds of the derived connection cap (SECKILL_HTTP_MAX_CONNS=0).
const (
	// fileReserve is kept for everything that is not an API connection:
	// the database pool, listeners, log and data files, the tracer.
	fileReserve = 1024
	// maxDerivedConns: beyond this many connections memory, not files, is
	// what runs out (each holds a goroutine and its buffers).
	maxDerivedConns = 65536
	minConns        = 64
	// fewConns: a derived cap below this is worth a warning at start; a
	// stampede holds thousands of connections.
	fewConns = 8192
)

// maxConns is the API's connection cap: SECKILL_HTTP_MAX_CONNS, or when 0
// the file limit less the Redis pools (per node: seeds are counted, a
// cluster has at least 3 masters) and fileReserve.
func (c Config) maxConns(files uint64) int {
	if c.HTTPMaxConns > 0 {
		return c.HTTPMaxConns
	}
	nodes := 1
	if c.RedisCluster() {
		nodes = max(len(c.RedisClusterAddrs), 3)
	}
	reserve := uint64(fileReserve + metricsMaxConns + nodes*c.RedisPoolSize)
	if files == 0 || files > reserve+maxDerivedConns {
		return maxDerivedConns
	}
	if files < reserve+minConns {
		return max(int(files/2), minConns)
	}
	return int(files - reserve)
}

// metricsMaxConns caps the metrics listener's connections: a few scrapers
// use it. Its files come out of the API's derived cap (maxConns), so no
// number of connections to it can starve the API of files.
const metricsMaxConns = 32

// newAPIServer is the API's server on a listener capped at max connections.
// Every listener of the process is built by it (the API's, the metrics'),
// so each has the same timeouts, header bound and connection cap.
func newAPIServer(h http.Handler, l net.Listener, max int) (*http.Server, net.Listener) {
	capped := &connCap{Listener: l, slots: make(chan struct{}, max),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		// Short because an idle keep-alive holds a file and a goroutine; a
		// reverse proxy's upstream keep-alive must be shorter still (nginx:
		// keepalive_timeout in the upstream block), or it may send a
		// request on a connection this side is closing.
		IdleTimeout:    30 * time.Second,
		MaxHeaderBytes: MaxHeaderBytes,
		ConnState:      capped.connState,
	}, capped
}

// listenError names the variable that chose the address, so an operator who
// meets a port clash knows what to change. Two instances on one host clash on
// both listeners, the second only after the first is moved, so a clash on
// either names both variables.
func listenError(what, variable, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen for %s on %s: the address is taken by another process: "+
			"set %s to a free host:port (a second instance on one host also needs "+
			"SECKILL_HTTP_ADDR and SECKILL_METRICS_ADDR apart from the first's; SECKILL_METRICS_ADDR=off disables metrics): %w",
			what, addr, variable, err)
	}
	return fmt.Errorf("listen for %s on %s (set by %s): %w", what, addr, variable, err)
}
