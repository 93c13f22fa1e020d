package httpapi

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
)

// TestShortCacheStaysBounded: a client walking ten thousand shop ids cannot
// grow the list cache past its bound, and a failed load is not kept.
func TestShortCacheStaysBounded(t *testing.T) {
	c := newShortCache[int](time.Hour, 64, func(err error) bool { return err == nil })
	for i := range 10_000 {
		if _, err := c.get(context.Background(), strconv.Itoa(i), func(context.Context) (int, error) { return i, nil }); err != nil {
			t.Fatal(err)
		}
		if n := len(c.items); n > 64 {
			t.Fatalf("after %d keys the cache holds %d entries, want at most 64", i+1, n)
		}
	}
	loads := 0
	failing := func(context.Context) (int, error) { loads++; return 0, errors.New("database down") }
	for range 3 {
		if _, err := c.get(context.Background(), "down", failing); err == nil {
			t.Fatal("a failed load answered no error")
		}
	}
	if loads != 3 {
		t.Fatalf("a failed load was reused: %d loads for 3 requests", loads)
	}
}
