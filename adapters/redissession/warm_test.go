package redissession_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// mintUsers logs users 1..n in through a client of its own, before any
// instance listens, and returns their tokens.
func mintUsers(t *testing.T, b testenv.RedisBackend, prefix string, n int) (redis.UniversalClient, []string) {
	t.Helper()
	ctx := context.Background()
	setup := b.Client(t)
	store := redissession.New(setup, redissession.Options{Prefix: prefix})
	tokens := make([]string, n)
	for i := range tokens {
		tok, err := store.Mint(ctx, domain.UserID(i+1))
		if err != nil {
			t.Fatal(err)
		}
		tokens[i] = tok
	}
	return setup, tokens
}

func waitWarm(t *testing.T, tr *redissession.Sessions) redissession.WarmProgress {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, func() (bool, string) {
		p := tr.WarmProgress()
		return p.Done, fmt.Sprintf("warm-up not done: %+v", p)
	})
	return tr.WarmProgress()
}

// TestSessionsWarmsUpFromRedis: sessions written before an instance starts
// are read into its cache by the warm-up, at most the cache size of them
// (more are written), and once it reports done each of those is served on
// its first request without Redis. Nothing is read before Warm.
func TestSessionsWarmsUpFromRedis(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			const size, users = 100, 300
			prefix := testenv.TokenPrefix(t)
			_, tokens := mintUsers(t, b, prefix, users)
			in := newInstance(t, b.Client, prefix, redissession.CacheOptions{Size: size, NoPrefetch: true})
			if p := in.sessions.WarmProgress(); p.Done || p.Read != 0 || in.sessions.Cached() != 0 {
				t.Fatalf("before Warm: %+v, %d cached", p, in.sessions.Cached())
			}
			in.sessions.Warm()
			p := waitWarm(t, in.sessions)
			// Each master fills its share of the cache (by its slots): all
			// of it on one node, 99 of 100 on three masters of 5461-5462
			// slots.
			if p.Cached < size-3 || p.Cached > size || in.sessions.Cached() > size {
				t.Fatalf("warmed %+v, %d cached; want about %d and at most %d", p, in.sessions.Cached(), size, size)
			}
			held := 0
			for i, tok := range tokens {
				if !in.sessions.Holds(tok) {
					continue
				}
				held++
				if n, err := lookupCost(in, tok, domain.UserID(i+1)); err != nil || n != 0 {
					t.Fatalf("first request of warmed user %d: %d commands, %v; want 0", i+1, n, err)
				}
			}
			if int64(held) != p.Cached {
				t.Fatalf("%d tokens held, the warm-up reported %d cached", held, p.Cached)
			}
			t.Logf("warm-up: %+v", p)
		})
	}
}

// TestSessionsWarmUpRacingARevocationCachesNothing: sessions deleted (and
// reported) while the warm-up reads them, between its read and its
// caching, are not cached: their requests are refused. (The warm-up caches
// as the read-back of a report does: a report that overtakes a read keeps
// its token out.)
func TestSessionsWarmUpRacingARevocationCachesNothing(t *testing.T) {
	for _, b := range testenv.RealRedisBackends() {
		t.Run(b.Name, func(t *testing.T) {
			const users = 20
			prefix := testenv.TokenPrefix(t)
			setup, tokens := mintUsers(t, b, prefix, users)
			var (
				tr     atomic.Pointer[redissession.Sessions]
				reads  atomic.Int64
				during = make(chan error, 1)
			)
			opts := redissession.WithAfterRead(redissession.CacheOptions{NoPrefetch: true}, func() {
				if reads.Add(1) != 1 {
					return
				}
				// The warm-up's first read is in: every session is revoked
				// before it caches anything.
				during <- func() error {
					reported := tr.Load().Reports()
					for _, tok := range tokens {
						if err := setup.Del(context.Background(), prefix+tok).Err(); err != nil {
							return err
						}
					}
					for deadline := time.Now().Add(5 * time.Second); tr.Load().Reports() < reported+users; {
						if time.Now().After(deadline) {
							return fmt.Errorf("%d of %d revocations reported", tr.Load().Reports()-reported, users)
						}
						time.Sleep(time.Millisecond) // polls the reports (the listener is another goroutine)
					}
					return nil
				}()
			})
			in := newInstance(t, b.Client, prefix, opts)
			tr.Store(in.sessions)
			in.sessions.Warm()
			p := waitWarm(t, in.sessions)
			select {
			case err := <-during:
				if err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("the warm-up read nothing: %+v", p)
			}
			// On a cluster the other masters' warm-ups run meanwhile: what
			// they cached before the revocations were reported is evicted
			// by the reports, and counted in p.Cached.
			t.Logf("warm-up: %+v", p)
			for i, tok := range tokens {
				if in.sessions.Holds(tok) {
					t.Fatalf("user %d's session, revoked during the warm-up, is held", i+1)
				}
				if _, err := in.sessions.UserID(context.Background(), tok); !errors.Is(err, ports.ErrUnknownToken) {
					t.Fatalf("user %d's session, revoked during the warm-up: %v, want ErrUnknownToken", i+1, err)
				}
			}
		})
	}
}

// TestSessionsWarmUpRetriesAfterAFailedRead: a warm-up's SCAN that fails on
// a connection that stays up (nothing brings the subscriber down, so
// nothing would start it again) is retried, not abandoned: it held 0 of
// 200,000 sessions in one of nine starts.
func TestSessionsWarmUpRetriesAfterAFailedRead(t *testing.T) {
	rdb := testenv.RealRedis(t)
	b := testenv.RedisBackend{Name: "redis", Client: func(testing.TB) redis.UniversalClient { return rdb }}
	const users = 50
	prefix := testenv.TokenPrefix(t)
	_, tokens := mintUsers(t, b, prefix, users)
	var failures atomic.Int64
	opts := redissession.WithScanFault(redissession.CacheOptions{NoPrefetch: true}, func() error {
		if failures.Add(1) <= 3 {
			return errors.New("injected: the SCAN reply was lost")
		}
		return nil
	})
	in := newInstance(t, func(testing.TB) redis.UniversalClient { return testenv.RealRedis(t) }, prefix, opts)
	in.sessions.Warm()
	p := waitWarm(t, in.sessions)
	if failures.Load() <= 3 || p.Cached != users {
		t.Fatalf("after %d failed SCANs the warm-up cached %+v; want all %d sessions", min(failures.Load(), 3), p, users)
	}
	for _, tok := range tokens {
		if !in.sessions.Holds(tok) {
			t.Fatalf("token %s not cached by the retried warm-up", tok)
		}
	}
}
