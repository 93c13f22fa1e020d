package infra

import (
	"container/list"
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

	mu      sync.Mutex
	waiting *list.List // *cappedConn awaiting a request, longest first

	evicted atomic.Int64
}

func newConnCap(l net.Listener, max int) *connCap {
	return &connCap{
		Listener: l, slots: make(chan struct{}, max), wake: make(chan struct{}, 1),
		done: make(chan struct{}), waiting: list.New(),
	}
}

type cappedConn struct {
	net.Conn
	cap     *connCap
	release sync.Once
	elem    *list.Element // in cap.waiting, or nil; guarded by cap.mu
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
		l.evictOldest()
		// Every connection was busy, or the one closed has not freed its
		// slot yet: wait for a slot, or for a connection to start waiting
		// for a request, which can then be closed.
		select {
		case l.slots <- struct{}{}:
			return &cappedConn{Conn: c, cap: l}, nil
		case <-l.wake:
		case <-l.done:
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
	front := l.waiting.Front()
	var c *cappedConn
	if front != nil {
		c = l.waiting.Remove(front).(*cappedConn)
		c.elem = nil
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
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.elem != nil {
		l.waiting.Remove(c.elem)
		c.elem = nil
	}
	if s == http.StateNew || s == http.StateIdle {
		c.elem = l.waiting.PushBack(c)
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
		if c.elem != nil {
			c.cap.waiting.Remove(c.elem)
			c.elem = nil
		}
		c.cap.mu.Unlock()
		<-c.cap.slots
	})
	return err
}
