package infra

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// connCap holds the API listener to at most max open connections, so idle
// keep-alives cannot fill the process's file limit (20,000 of them did, in
// seconds, and real claims then timed out). Unlike a plain limit, which
// makes a new client wait until an idle connection times out, a connection
// accepted at the cap closes the one that has waited longest for a request
// (idle between requests, or new with its request unread): it is the
// cheapest to lose, a client's keep-alive reconnects, and it is what an
// attacker holds. When every connection is busy with a request, Accept waits
// for one to finish; new clients wait in the kernel's backlog meanwhile.
type connCap struct {
	net.Listener
	slots   chan struct{} // a token per open connection
	wake    chan struct{} // a connection began to wait for a request
	done    chan struct{}
	closing sync.Once

	// The connections awaiting a request, longest first: a list through
	// the connections themselves, so a request's two state changes
	// allocate nothing (a container/list element per idle turn was 0.9 µs
	// of a sold-out answer, 2% of the service's CPU in a hot sale).
	mu         sync.Mutex
	head, tail *cappedConn

	// acceptors counts the Accept calls waiting for a connection to begin
	// to wait: only then is wake sent.
	acceptors atomic.Int32
	evicted   atomic.Int64
}

type cappedConn struct {
	net.Conn
	cap     *connCap
	release sync.Once
	// Under cap.mu: its place in the waiting list, if it is in it.
	prev, next *cappedConn
	waiting    bool
}

// push appends c to the waiting list; l.mu is held and c is not in it.
func (l *connCap) push(c *cappedConn) {
	c.prev, c.next, c.waiting = l.tail, nil, true
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
}

// unlink takes c out of the waiting list if it is in it; l.mu is held.
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
		// Every connection was busy, or the one closed has not freed its
		// slot yet: wait for a slot, or for a connection to start waiting
		// for a request, which can then be closed. Counted as waiting
		// before the look, so a connection that begins to wait after it
		// wakes this Accept.
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

// evictOldest closes the connection that has waited longest for a request,
// if any does; its slot frees when it is closed.
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

// connState is the server's ConnState hook: it keeps the list of connections
// waiting for a request in the order they began to wait.
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
