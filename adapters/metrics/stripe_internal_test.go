package metrics

import (
	"sync"
	"testing"
	"unsafe"
)

// TestCounterSumsConcurrentAdds: every add from many goroutines is in the
// sum, and the cells sit on cache lines of their own.
func TestCounterSumsConcurrentAdds(t *testing.T) {
	var c stripedCounter
	const goroutines, adds = 8, 10_000
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < adds; i++ {
				c.Add(int64(g%2 + 1))
			}
		}()
	}
	wg.Wait()
	if got, want := c.Load(), int64(goroutines/2*adds*1+goroutines/2*adds*2); got != want {
		t.Fatalf("sum %d, want %d", got, want)
	}
	used := 0
	for i := range c.cells {
		if c.cells[i].n.Load() != 0 {
			used++
		}
	}
	if used < 2 {
		t.Fatalf("%d of %d cells were added to: the adds are not spread", used, stripeCells)
	}
	if s := unsafe.Sizeof(cell{}); s != 64 {
		t.Fatalf("a cell is %d bytes, want a cache line (64)", s)
	}
}

// An add allocates nothing.
func TestCounterAddAllocatesNothing(t *testing.T) {
	var c stripedCounter
	if n := testing.AllocsPerRun(100, func() { c.Add(1) }); n != 0 {
		t.Fatalf("an add allocated %.0f times", n)
	}
}
