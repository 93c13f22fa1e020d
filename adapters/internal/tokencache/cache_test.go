package tokencache

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

func TestCacheEntriesLapseTTLAfterTheirAdd(t *testing.T) {
	var clock time.Duration
	c := New[int](2)
	const ttl = 10 * time.Second
	c.Now = func() time.Duration { return clock }

	c.AddFor("a", 1, ttl, 0, 0)
	clock = 9 * time.Second
	if id, ok := c.Get("a"); !ok || id != 1 {
		t.Fatalf("Get(a) before its TTL = %d, %v; want 1, true", id, ok)
	}
	c.AddFor("b", 2, ttl, 0, 0) // added at 9s: lapses at 19s
	clock = 10 * time.Second
	if id, ok := c.Get("a"); ok {
		t.Fatalf("Get(a) at its TTL = %d, want a miss", id)
	}
	if id, ok := c.Get("b"); !ok || id != 2 {
		t.Fatalf("Get(b) = %d, %v; want 2, true", id, ok)
	}
	// Adding again restarts the TTL.
	c.AddFor("a", 3, ttl, 0, 0)
	clock = 19 * time.Second
	if _, ok := c.Get("b"); ok {
		t.Fatal("b outlived its TTL")
	}
	if id, ok := c.Get("a"); !ok || id != 3 {
		t.Fatalf("Get(a) after it was added again = %d, %v; want 3, true", id, ok)
	}
}

func TestCacheIsBoundedAndForgetsOnRequest(t *testing.T) {
	c := New[int](3)
	const ttl = time.Hour
	for i := 1; i <= 4; i++ {
		c.AddFor(fmt.Sprint("t", i), i, ttl, 0, 0)
	}
	if _, ok := c.Get("t1"); ok {
		t.Fatal("the least recently used token stayed past the size bound")
	}
	for i := 2; i <= 4; i++ {
		if id, ok := c.Get(fmt.Sprint("t", i)); !ok || id != i {
			t.Fatalf("Get(t%d) = %d, %v", i, id, ok)
		}
	}
	c.Remove("t3")
	if _, ok := c.Get("t3"); ok {
		t.Fatal("a removed token is still answered")
	}
}

// The session caches' defaults.
const (
	benchSize = 100_000
	benchTTL  = 10 * time.Second
)

// BenchmarkTokenCacheFirstRequest is what every user's first claim costs the
// cache: a miss, then an add (Cache against the expirable.LRU it
// replaced: 350-370 against 740-820 ns/op here).
func BenchmarkTokenCacheFirstRequest(b *testing.B) {
	tokens := make([]string, 1<<20)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("%032x", i)
	}
	b.Run("Cache", func(b *testing.B) {
		c := New[int](benchSize)
		for i := 0; b.Loop(); i++ {
			tok := tokens[i&(len(tokens)-1)]
			if _, ok := c.Get(tok); !ok {
				c.AddFor(tok, i, benchTTL, 0, 0)
			}
		}
	})
	b.Run("expirable", func(b *testing.B) {
		c := expirable.NewLRU[string, int](benchSize, nil, benchTTL)
		for i := 0; b.Loop(); i++ {
			tok := tokens[i&(len(tokens)-1)]
			if _, ok := c.Get(tok); !ok {
				c.Add(tok, i)
			}
		}
	})
}
