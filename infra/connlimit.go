package infra

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// connCap holds a listener to at most max open connections. A connection accepted at
// the cap closes the one waiting longest for a request; when all are busy, Accept waits.
type connCap struct {
	net.Listener
	slots   chan struct{} // a token per open connection
	wake    chan struct{} // a connection began to wait for a request
	done    chan struct{}
	closing sync.Once
	// The connections awaiting a request, longest first, linked through themselves (no allocation).
	mu         sync.Mutex
	head, tail *cappedConn
	acceptors  atomic.Int32 // Accepts waiting: only then is wake sent
	evicted    atomic.Int64
}

type cappedConn struct {
	net.Conn
	cap        *connCap
	release    sync.Once
	prev, next *cappedConn // under cap.mu
	waiting    bool
}

// push appends c to the waiting list; l.mu is held.
func (l *connCap) push(c *cappedConn) {
	c.prev, c.next, c.waiting = l.tail, nil, true
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
}

// unlink takes c out of the waiting list if there; l.mu is held.
func (l *connCap) unlink(c *cappedConn) {
	if !c.waiting {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.prev, c.next, c.waiting = nil, nil, false
}

func (l *connCap) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case l.slots <- struct{}{}:
			return &cappedConn{Conn: c, cap: l}, nil
		default:
		}
		// Counted before the look, so a connection that begins to wait after it wakes this Accept.
		l.acceptors.Add(1)
		l.evictOldest()
		select {
		case l.slots <- struct{}{}:
			l.acceptors.Add(-1)
			return &cappedConn{Conn: c, cap: l}, nil
		case <-l.wake:
			l.acceptors.Add(-1)
		case <-l.done:
			l.acceptors.Add(-1)
			_ = c.Close()
			return nil, net.ErrClosed
		}
	}
}

func (l *connCap) Close() error {
	l.closing.Do(func() { close(l.done) })
	return l.Listener.Close()
}

func (l *connCap) evictOldest() {
	l.mu.Lock()
	c := l.head
	if c != nil {
		l.unlink(c)
	}
	l.mu.Unlock()
	if c != nil {
		l.evicted.Add(1)
		_ = c.Close()
	}
}

func (l *connCap) connState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*cappedConn)
	if !ok {
		return
	}
	waits := s == http.StateNew || s == http.StateIdle
	l.mu.Lock()
	l.unlink(c)
	if waits {
		l.push(c)
	}
	l.mu.Unlock()
	if waits && l.acceptors.Load() > 0 {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.release.Do(func() {
		c.cap.mu.Lock()
		c.cap.unlink(c)
		c.cap.mu.Unlock()
		<-c.cap.slots
	})
	return err
}

// MaxHeaderBytes bounds a request's header (over it: 431); Go's 1 MiB let unfinished headers grow the heap.
const MaxHeaderBytes = 16 << 10

// Bounds of the derived connection cap (SECKILL_HTTP_MAX_CONNS=0).
const (
	fileReserve     = 1024  // files that are not API connections: pools, listeners, logs
	maxDerivedConns = 65536 // beyond it memory, not files, runs out
	minConns        = 64
	fewConns        = 8192 // a derived cap below it is warned of: a stampede holds thousands
)

// maxConns is SECKILL_HTTP_MAX_CONNS, or when 0 the file limit less the Redis
// pools (per node; a cluster has at least 3 masters) and fileReserve.
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

// metricsMaxConns caps the metrics listener; maxConns reserves its files.
const metricsMaxConns = 32

// newAPIServer serves h on l capped at max connections; every listener of the process is built by it.
func newAPIServer(h http.Handler, l net.Listener, max int) (*http.Server, net.Listener) {
	capped := &connCap{Listener: l, slots: make(chan struct{}, max),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		// An idle keep-alive holds a file; a reverse proxy's upstream keep-alive must be shorter still.
		IdleTimeout:    30 * time.Second,
		MaxHeaderBytes: MaxHeaderBytes,
		ConnState:      capped.connState,
	}, capped
}

// listenError names the variable that chose the address; a clash names both listeners' variables.
func listenError(what, variable, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen for %s on %s: the address is taken by another process: "+
			"set %s to a free host:port (a second instance on one host also needs "+
			"SECKILL_HTTP_ADDR and SECKILL_METRICS_ADDR apart from the first's; SECKILL_METRICS_ADDR=off disables metrics): %w",
			what, addr, variable, err)
	}
	return fmt.Errorf("listen for %s on %s (set by %s): %w", what, addr, variable, err)
}
