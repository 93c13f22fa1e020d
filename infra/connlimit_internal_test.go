package infra

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/test/testenv"
)

// capped serves h on a loopback listener held to max connections.
func capped(t *testing.T, max int, h http.Handler) (*connCap, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, cl := newAPIServer(h, l, max)
	go func() { _ = srv.Serve(cl) }()
	t.Cleanup(func() { _ = srv.Close() })
	return cl.(*connCap), l.Addr().String()
}

// waiting lists the peers of the connections waiting for a request,
// longest first.
func (l *connCap) waiting() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for c := l.head; c != nil; c = c.next {
		out = append(out, c.RemoteAddr().String())
	}
	return out
}

// roundTrip sends one GET of path on conn and reads its answer's status.
func roundTrip(conn net.Conn, br *bufio.Reader, path string) (int, error) {
	if _, err := conn.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		return 0, err
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	_ = res.Body.Close()
	return res.StatusCode, nil
}

// TestAcceptAtTheCapWaitsForAConnectionToIdle: with every connection busy
// with a request, a new one waits; the moment one of them finishes and
// waits for its next request, it is closed and the new one is served. A
// lost wake-up would leave the new client waiting out the idle timeout.
func TestAcceptAtTheCapWaitsForAConnectionToIdle(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	cap, addr := capped(t, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			entered <- struct{}{}
			<-release
		}
	}))
	type client struct {
		conn net.Conn
		br   *bufio.Reader
	}
	dial := func() client {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		return client{c, bufio.NewReader(c)}
	}
	busy := []client{dial(), dial()}
	done := make(chan error, len(busy))
	for _, c := range busy {
		go func() { _, err := roundTrip(c.conn, c.br, "/busy"); done <- err }()
	}
	for range busy {
		<-entered
	}
	// Both connections are busy: the third is accepted by the kernel and
	// waits in Accept. One request finishes; its connection idles.
	late := dial()
	testenv.Eventually(t, 5*time.Second, func() (bool, string) {
		return cap.acceptors.Load() == 1, "the connection over the cap is not waiting in Accept"
	})
	answered := make(chan error, 1)
	go func() {
		code, err := roundTrip(late.conn, late.br, "/quick")
		if err == nil && code != http.StatusOK {
			err = &net.OpError{Op: "status " + http.StatusText(code)}
		}
		answered <- err
	}()
	release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatalf("the busy request that finished: %v", err)
	}
	if err := <-answered; err != nil {
		t.Fatalf("the connection accepted at the cap was not served once another idled: %v", err)
	}
	if n := cap.evicted.Load(); n != 1 {
		t.Fatalf("%d connections closed for the new one, want 1 (the one that idled)", n)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the other busy request: %v", err)
	}
}

// TestTheLongestIdleConnectionGoesFirst: at the cap, a new connection
// closes the one that has waited longest for a request; one that was used
// since keeps its place at the back.
func TestTheLongestIdleConnectionGoesFirst(t *testing.T) {
	cap, addr := capped(t, 3, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var conns []net.Conn
	var readers []*bufio.Reader
	// use makes a request on connection i and waits until the server
	// counts it as waiting for the next (it does so after the answer is
	// out, so a client can be faster).
	use := func(i int) {
		t.Helper()
		if code, err := roundTrip(conns[i], readers[i], "/"); err != nil || code != http.StatusOK {
			t.Fatalf("connection %d: %d, %v", i, code, err)
		}
		me := conns[i].LocalAddr().String()
		testenv.Eventually(t, 5*time.Second, func() (bool, string) {
			w := cap.waiting()
			return len(w) > 0 && w[len(w)-1] == me, fmt.Sprintf("connection %d is not the last to wait: %v", i, w)
		})
	}
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		conns, readers = append(conns, c), append(readers, bufio.NewReader(c))
		use(i)
	}
	// The first connection is used again: the second has now waited
	// longest.
	use(0)
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := roundTrip(extra, bufio.NewReader(extra), "/"); err != nil {
		t.Fatalf("the connection over the cap: %v", err)
	}
	// The second connection was closed: a read sees its end.
	if _, err := readers[1].ReadByte(); err == nil {
		t.Fatal("the longest idle connection is still open")
	}
	for _, i := range []int{0, 2} {
		if code, err := roundTrip(conns[i], readers[i], "/"); err != nil || code != http.StatusOK {
			t.Fatalf("connection %d, idle for less long, was closed: %d, %v", i, code, err)
		}
	}
	if n := cap.evicted.Load(); n != 1 {
		t.Fatalf("%d connections closed, want 1", n)
	}
}
