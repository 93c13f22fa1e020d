package infra_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestHugeHeadersCannotGrowTheHeap is issue 24's header attack, bounded: 100
// connections each send 1 MiB of a header that never ends. With Go's
// default limit (1 MiB) the server buffers each one, over 100 MiB of heap;
// with MaxHeaderBytes each is answered 431 (or closed) after 20 KiB, and the
// heap stays where it was.
func TestHugeHeadersCannotGrowTheHeap(t *testing.T) {
	const conns, header = 100, 1 << 20
	c := infra.DefaultConfig()
	c.Queue = infra.QueueChannel
	app := startEmbedded(t, c, zerolog.Nop())
	payload := append([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Fill: "), bytes.Repeat([]byte("a"), header)...)

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	held := make([]net.Conn, conns)
	var wg sync.WaitGroup
	for i := range held {
		conn, err := net.Dial("tcp", app.Addr())
		if err != nil {
			t.Fatal(err)
		}
		held[i] = conn
		t.Cleanup(func() { _ = conn.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = conn.SetWriteDeadline(time.Now().Add(4 * time.Second))
			_, _ = conn.Write(payload) // refused early with the limit: the error is the point
		}()
	}
	wg.Wait()
	after := heap()
	growth := int64(after) - int64(before)
	t.Logf("heap %d MiB before, %d MiB with %d unfinished 1 MiB headers sent", before>>20, after>>20, conns)
	if growth > 16<<20 {
		t.Fatalf("%d connections with unfinished headers grew the heap by %d MiB, want under 16", conns, growth>>20)
	}
	for i, conn := range held {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Fatalf("connection %d: HTTP %d, want 431 or a closed connection", i, resp.StatusCode)
			}
		}
	}
}

// TestMetricsListenerHasTheAPIsProtections: the metrics port is a listener
// of the same process, so an attack on it is an attack on the API's files
// and memory. 200 idle keep-alives to it are held to its cap (the longest
// idle closed for new ones) while a fresh scrape and a claim-path request on
// the API are answered; 100 unfinished 1 MiB headers are refused with 431 or
// a closed connection, not buffered. Before, it had Go's defaults: no cap,
// no idle timeout, 1 MiB headers.
func TestMetricsListenerHasTheAPIsProtections(t *testing.T) {
	const attackers, cap = 200, 32 // cap: infra.metricsMaxConns
	c := infra.DefaultConfig()
	c.Queue = infra.QueueChannel
	app := startEmbedded(t, c, zerolog.Nop())
	metrics := app.Observability.MetricsAddr()
	if metrics == "" {
		t.Fatal("no metrics listener")
	}
	baseline := openFiles(t)

	var held atomic.Int64
	for range attackers {
		conn, err := net.Dial("tcp", metrics)
		if err != nil {
			t.Fatal(err)
		}
		held.Add(1)
		t.Cleanup(func() { _ = conn.Close() })
		go func() {
			defer held.Add(-1)
			defer conn.Close()
			// Not a scrape: promhttp answers 503 past its own bound of
			// scrapes in flight, and the point here is the held connection.
			if _, err := conn.Write([]byte("GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				return
			}
			br := bufio.NewReader(conn)
			if resp, err := http.ReadResponse(br, nil); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			_, _ = br.ReadByte() // blocks while the server holds the connection
		}()
	}
	slack := 16
	testenv.Eventually(t, 10*time.Second, func() (bool, string) {
		server := openFiles(t) - baseline - int(held.Load())
		return server <= cap+slack, fmt.Sprintf("the server holds %d files for %d connections to the metrics port (cap %d)", server, attackers, cap)
	})
	fresh := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, url := range []string{"http://" + metrics + "/metrics", "http://" + app.Addr() + "/healthz"} {
		resp, err := fresh.Get(url)
		if err != nil {
			t.Fatalf("GET %s while the metrics port is flooded: %v", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s while the metrics port is flooded: HTTP %d", url, resp.StatusCode)
		}
	}

	// Unfinished huge headers: refused, not buffered.
	payload := append([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Fill: "), bytes.Repeat([]byte("a"), 1<<20)...)
	for i := range 20 {
		conn, err := net.Dial("tcp", metrics)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write(payload) // refused early: the error is the point
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Fatalf("connection %d: HTTP %d for a 1 MiB header, want 431 or a closed connection", i, resp.StatusCode)
			}
		}
		_ = conn.Close()
	}
}
