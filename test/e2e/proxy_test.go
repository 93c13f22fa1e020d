package e2e_test

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tcpProxy forwards a loopback port to a server, and can cut every
// connection and refuse new ones for a while, or slow every request down: a
// database outage or a distant database the test controls, without touching
// the shared server.
type tcpProxy struct {
	t      *testing.T
	addr   string
	target string
	// latency delays what a client sends, chunk by chunk, before the server
	// gets it: each round trip to the server takes at least this long.
	latency atomic.Int64

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{t: t, target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *tcpProxy) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut while dialling
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server, lagReader{client, p}); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, server); done <- struct{}{} }()
	<-done
	client.Close()
	server.Close()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// cut closes the listener and every open connection: the database is gone.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// restore listens again on the same address: the database is back.
func (p *tcpProxy) restore() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy cannot listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// setLatency makes every request through the proxy wait d (0: none) from now
// on, so a test can bound how fast the services write, whatever the machine.
func (p *tcpProxy) setLatency(d time.Duration) { p.latency.Store(int64(d)) }

// lagReader is a client's side of a connection, read after the proxy's latency.
type lagReader struct {
	r io.Reader
	p *tcpProxy
}

func (l lagReader) Read(b []byte) (int, error) {
	n, err := l.r.Read(b)
	if d := time.Duration(l.p.latency.Load()); d > 0 && n > 0 {
		time.Sleep(d) // the simulated network, not a synchronisation
	}
	return n, err
}
