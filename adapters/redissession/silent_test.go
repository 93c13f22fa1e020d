package redissession_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// silentProxy forwards TCP to a target until silence is called; from then on
// it forwards nothing either way and closes nothing, as a peer gone without a
// reset would (a host lost, a NAT entry dropped): writes succeed, answers
// never come.
type silentProxy struct {
	ln     net.Listener
	silent atomic.Bool
}

func startSilentProxy(t *testing.T, target string) *silentProxy {
	t.Helper()
	p := &silentProxy{}
	p.ln = serveEach(t, func(c net.Conn) {
		u, err := net.Dial("tcp", target)
		if err != nil {
			_ = c.Close()
			return
		}
		t.Cleanup(func() { _ = c.Close(); _ = u.Close() })
		go p.pipe(u, c)
		go p.pipe(c, u)
	})
	return p
}

func (p *silentProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if p.silent.Load() {
			continue // dropped
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// TestSessionsStopServingWhenTheirSubscriberGoesSilent: the subscriber's
// connection goes silent (no reset: its pings are written and never
// answered) while the master lives on, and a user logs out there. The
// instance hears no report, so it must stop serving the master's sessions
// from memory once a ping goes unanswered: the logged-out token is then
// looked up (and refused, or failed) instead of served for as long as the
// cache keeps it.
func TestSessionsStopServingWhenTheirSubscriberGoesSilent(t *testing.T) {
	ctx := context.Background()
	setup := testenv.RealRedis(t)
	prefix := testenv.TokenPrefix(t)
	logout, err := redissession.New(setup, redissession.Options{Prefix: prefix}).Mint(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startSilentProxy(t, setup.Options().Addr)
	in := newInstance(t, func(tb testing.TB) redis.UniversalClient {
		o := *setup.Options()
		o.Addr, o.ReadTimeout = proxy.ln.Addr().String(), 300*time.Millisecond
		c := redis.NewClient(&o)
		tb.Cleanup(func() { _ = c.Close() })
		return c
	}, prefix, redissession.CacheOptions{NoPrefetch: true})
	testenv.Eventually(t, 5*time.Second, func() (bool, string) {
		if u, err := in.sessions.UserID(ctx, logout); err != nil || u != 2 {
			return false, fmt.Sprintf("lookup: %d, %v", u, err)
		}
		before := in.sent.all.Load()
		_, _ = in.sessions.UserID(ctx, logout)
		return in.sent.all.Load() == before, "a lookup is not cached"
	})

	proxy.silent.Store(true)
	if err := setup.Del(ctx, prefix+logout).Err(); err != nil { // the logout, heard by nobody
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() (bool, string) {
		u, err := in.sessions.UserID(ctx, logout)
		return err != nil || u != domain.UserID(2), fmt.Sprintf("the logged-out token is still served as user %d (%d downs)", u, in.sessions.Downs())
	})
	if in.sessions.Downs() == 0 {
		t.Fatal("the silent subscriber was never counted down")
	}
}
