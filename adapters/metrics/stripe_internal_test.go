package metrics

import (
	"sync"
	"testing"
	"unsafe"
)

// TestCounterSumsConcurrentAdds: every add from many goroutines is in the
// sum, and the rows sit on cache lines of their own.
func TestCounterSumsConcurrentAdds(t *testing.T) {
	c := newStripes(1)
	const goroutines, adds = 8, 10_000
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < adds; i++ {
				c.add(0, int64(g%2+1))
			}
		}()
	}
	wg.Wait()
	if got, want := c.load(0), int64(goroutines/2*adds*1+goroutines/2*adds*2); got != want {
		t.Fatalf("sum %d, want %d", got, want)
	}
	used := 0
	for r := 0; r < stripeCells; r++ {
		if c.cell(r, 0).Load() != 0 {
			used++
		}
	}
	if used < 2 {
		t.Fatalf("%d of %d rows were added to: the adds are not spread", used, stripeCells)
	}
	// Between a row's last counter and the next row's first, a cache line
	// (64 bytes) at least, whatever the number of counters.
	for _, n := range []int{1, 7, 8, 9, 16} {
		s := newStripes(n)
		last, next := s.cell(0, n-1), s.cell(1, 0)
		if gap := uintptr(unsafe.Pointer(next)) - uintptr(unsafe.Pointer(last)) - unsafe.Sizeof(*last); gap < 64 {
			t.Fatalf("%d counters: rows %d bytes apart, want a cache line (64)", n, gap)
		}
	}
}

// An add allocates nothing.
func TestCounterAddAllocatesNothing(t *testing.T) {
	c := newStripes(1)
	if n := testing.AllocsPerRun(100, func() { c.add(0, 1) }); n != 0 {
		t.Fatalf("an add allocated %.0f times", n)
	}
}
