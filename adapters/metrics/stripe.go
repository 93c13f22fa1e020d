package metrics

import (
	"math/rand/v2"
	"sync/atomic"
)

// stripes is n counters that many goroutines add to at once without making
// every add fight for one cache line. It backs every count the claim path
// adds to: the per-voucher outcome counts, the sold-out mark's saved count,
// and the claim route's Prometheus instruments (striped.go).
//
// On the sold-out answer, the claim path's hottest, each shared atomic
// counter the answer touched (the marks' saved count, the per-voucher
// outcome count) moved its cache line between the cores on every request:
// answering without them ran the hot sale 3% faster. stripes keeps
// stripeCells rows of the n counters and adds to a row chosen at random per
// add (the runtime's per-thread generator: no shared state), so two cores
// meet on one row only by chance; a read sums the rows. A row's end and the
// next row's start are a cache line apart at least.
type stripes []atomic.Int64

// stripeCells is how many rows stripes spreads its adds over.
const stripeCells = 8

// newStripes makes n counters, each zero.
func newStripes(n int) stripes { return make(stripes, stripeCells*((n+7)/8*8+8)) }

// row is the row an add goes to.
func (s stripes) row() stripes {
	w := len(s) / stripeCells
	r := int(rand.Uint32()%stripeCells) * w
	return s[r : r+w]
}

// add adds d to counter i.
func (s stripes) add(i int, d int64) { s.row()[i].Add(d) }

// cell is counter i of row r.
func (s stripes) cell(r, i int) *atomic.Int64 { return &s[r*(len(s)/stripeCells)+i] }

// load is the sum of every add to counter i so far. Adds concurrent with it
// may or may not be in it, each whole.
func (s stripes) load(i int) int64 {
	var n int64
	for r := 0; r < stripeCells; r++ {
		n += s.cell(r, i).Load()
	}
	return n
}
