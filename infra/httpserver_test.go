package infra_test

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/infra"
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
