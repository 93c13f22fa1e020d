package redissession_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The claim path's session lookups, as the service makes them: a hit (a
// user whose session is cached: the wide scenario's every claim after the
// first), a miss (a token Redis does not hold: one pipelined round trip) and
// a miss that caches its answer (a user's first claim: a round trip, then the
// guard's check and the add).

func benchSessions(b *testing.B, opts redissession.CacheOptions) (ports.Sessions, []string) {
	b.Helper()
	rdb := testenv.RealRedis(b)
	prefix := testenv.TokenPrefix(b)
	store := redissession.New(rdb, redissession.Options{Prefix: prefix, Lookups: testenv.AutoPipelined(b, rdb, true)})
	tokens := make([]string, 1000)
	for i := range tokens {
		tok, err := store.Mint(context.Background(), domain.UserID(i+1))
		if err != nil {
			b.Fatal(err)
		}
		tokens[i] = tok
	}
	s, err := redissession.NewSessions(context.Background(), rdb, store, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	for i, tok := range tokens { // cached by its first lookup
		if u, err := s.UserID(context.Background(), tok); err != nil || u != domain.UserID(i+1) {
			b.Fatalf("lookup: %d, %v", u, err)
		}
	}
	return s, tokens
}

func BenchmarkSessionHit(b *testing.B) {
	s, tokens := benchSessions(b, redissession.CacheOptions{})
	benchLookups(b, s, func(i int) string { return tokens[i%len(tokens)] }, nil)
}

func BenchmarkSessionMiss(b *testing.B) {
	s, _ := benchSessions(b, redissession.CacheOptions{})
	benchLookups(b, s, func(i int) string { return "unknown-" + strconv.Itoa(i) }, ports.ErrUnknownToken)
}

// BenchmarkSessionMissCached: a cache of one entry, so each lookup of the
// 1000 users misses, reads the session and caches it (pushing the last one
// out).
func BenchmarkSessionMissCached(b *testing.B) {
	s, tokens := benchSessions(b, redissession.CacheOptions{Size: 1, NoPrefetch: true})
	benchLookups(b, s, func(i int) string { return tokens[i%len(tokens)] }, nil)
}

// benchLookups looks token(0), token(1)... up in parallel, each answering
// want (nil: a user).
func benchLookups(b *testing.B, s ports.Sessions, token func(int) string, want error) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for i := 0; pb.Next(); i++ {
			if _, err := s.UserID(ctx, token(i)); !errors.Is(err, want) {
				b.Error(err)
				return
			}
		}
	})
}
