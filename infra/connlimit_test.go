package infra_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

// openFiles counts this process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files here: %v", err)
	}
	return len(fds)
}

// apiCall makes one request through a fresh connection and decodes the
// envelope's data string.
func apiCall(t *testing.T, c *http.Client, method, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("authorization", token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var env struct {
		Success bool
		Data    json.RawMessage
	}
	_ = json.NewDecoder(resp.Body).Decode(&env)
	var s string
	_ = json.Unmarshal(env.Data, &s)
	if !env.Success {
		return resp.StatusCode, ""
	}
	return resp.StatusCode, s
}

// TestIdleConnectionsCannotExhaustFiles is issue 24's idle-connection attack,
// bounded: with the cap at 64, 200 clients each make one request and keep
// their connection open. The service holds at most the cap open (the
// longest idle ones are closed for new ones), so it cannot run out of files,
// and real claims made meanwhile, on new connections, are all answered.
func TestIdleConnectionsCannotExhaustFiles(t *testing.T) {
	const maxConns, attackers, claims = 64, 200, 8
	c := infra.DefaultConfig()
	c.Queue = infra.QueueChannel
	c.HTTPMaxConns = maxConns
	c.AdminUsers = "1"
	app := startEmbedded(t, c, zerolog.Nop())
	base := "http://" + app.Addr()
	fresh := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	store := redissession.New(app.Redis, redissession.Options{TTL: time.Hour})
	admin, _ := store.Mint(context.Background(), 1)
	begin, end := time.Now().UTC().Add(-time.Minute), time.Now().UTC().Add(time.Hour)
	code, voucher := apiCall(t, fresh, http.MethodPost, base+"/voucher/seckill", admin, fmt.Sprintf(
		`{"shopId":1,"title":"t","payValue":1,"actualValue":2,"type":1,"stock":100,"beginTime":%q,"endTime":%q}`,
		begin.Format(time.RFC3339), end.Format(time.RFC3339)))
	if code != http.StatusOK || voucher == "" {
		t.Fatalf("create voucher: HTTP %d", code)
	}
	tokens := make([]string, claims)
	for i := range tokens {
		tokens[i], _ = store.Mint(context.Background(), domain.UserID(100+i))
	}
	baseline := openFiles(t)

	// The attackers: one GET each, then the connection is held, idle, until
	// the server closes it (which the reader sees as EOF and closes its end).
	var attackerOpen atomic.Int64
	var wg sync.WaitGroup
	for range attackers {
		conn, err := net.Dial("tcp", app.Addr())
		if err != nil {
			t.Fatal(err)
		}
		attackerOpen.Add(1)
		t.Cleanup(func() { _ = conn.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer attackerOpen.Add(-1)
			defer conn.Close()
			if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				return
			}
			br := bufio.NewReader(conn)
			if resp, err := http.ReadResponse(br, nil); err == nil {
				resp.Body.Close()
			}
			_, _ = br.ReadByte() // blocks while the connection is held
		}()
	}

	// Real users claim while the attackers hold their connections.
	var answered atomic.Int64
	var cw sync.WaitGroup
	for _, tok := range tokens {
		cw.Add(1)
		go func() {
			defer cw.Done()
			if code, order := apiCall(t, fresh, http.MethodPost, base+"/voucher-order/seckill/"+voucher, tok, ""); code == http.StatusOK && order != "" {
				answered.Add(1)
			}
		}()
	}
	cw.Wait()
	if n := answered.Load(); n != claims {
		t.Fatalf("%d of %d claims succeeded while %d connections were held", n, claims, attackers)
	}

	// The server's share of the open files: all of them, less what the test
	// had before and what the attackers still hold open.
	slack := 16 // the claims' own connections closing, backend pools
	testenv.Eventually(t, 10*time.Second, func() (bool, string) {
		server := openFiles(t) - baseline - int(attackerOpen.Load())
		return server <= maxConns+slack, fmt.Sprintf("the server holds %d files for %d attacking connections (cap %d)", server, attackers, maxConns)
	})
	t.Logf("%d attacking connections: %d still open on the attackers' side, files %d over the baseline",
		attackers, attackerOpen.Load(), openFiles(t)-baseline)
}
