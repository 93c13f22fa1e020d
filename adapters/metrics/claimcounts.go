package metrics

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Outcomes of the live page's counts besides a refusal's own code (and
// OutcomeError: anything else).
const (
	OutcomeSuccess = "success"
	OutcomeBusy    = "busy" // not admitted: nothing changed, try again
)

// MaxCountedVouchers bounds the vouchers counted separately. Only vouchers the gate
// knows get an entry (a not_found answer never creates one), so a client
// claiming made-up ids cannot grow the map; the bound is a second fence.
const MaxCountedVouchers = 4096

// outcomes is the fixed order of the per-voucher counters.
var outcomes = func() []string {
	out := []string{OutcomeSuccess}
	for _, r := range domain.Refusals() {
		out = append(out, r.Code())
	}
	return append(out, OutcomeBusy, OutcomeError)
}()

var outcomeIndex = func() map[string]int {
	m := make(map[string]int, len(outcomes))
	for i, o := range outcomes {
		m[o] = i
	}
	return m
}()

// counts is one voucher's count per outcome, striped (stripeCells rows,
// each add to one chosen at random, a read summing them): the sold-out
// answers of a stampede all add to one outcome, and one shared counter
// moved its cache line between the cores on every answer. A row's end and
// the next row's start are a cache line apart at least.
type counts []atomic.Int64

// stride is the distance between two rows of counts.
var stride = (len(outcomes)+7)/8*8 + 8

func newCounts() counts { return make(counts, stripeCells*stride) }

func (cs counts) add(outcome int) { cs[pickCell()*stride+outcome].Add(1) }

func (cs counts) load(outcome int) int64 {
	var n int64
	for r := 0; r < stripeCells; r++ {
		n += cs[r*stride+outcome].Load()
	}
	return n
}

// soldOutIndex is the sold-out outcome's place in counts.
var soldOutIndex = outcomeIndex[domain.ErrSoldOut.Code()]

// ClaimCounter counts, in process, how claims are answered per voucher
// and outcome, for the live sale page, and how many were answered from the
// sold-out mark, for the metrics. The claim tells it every answer (it is the
// claim's application.ClaimRecorder): an atomic add or two on the claim path, no
// lock once a voucher is known. Unlike the Prometheus series, it
// counts per voucher: what the page needs to draw claims per second.
// The zero value is not usable: use NewClaimCounter.
type ClaimCounter struct {
	mu       sync.Mutex // guards adding entries; reads go through the sync.Map
	vouchers sync.Map   // domain.VoucherID -> counts
	n        int
	h        histories
	saved    stripedCounter
}

func NewClaimCounter() *ClaimCounter { return &ClaimCounter{} }

// The claim's recorder (application.ClaimRecorder) is ClaimAnswered; infra
// hands the ClaimCounter to the claim, which checks it when it compiles.
var _ ports.ClaimCounts = (*ClaimCounter)(nil)

// Claims returns the voucher's counts so far; every outcome is present.
func (c *ClaimCounter) Claims(id domain.VoucherID) map[string]int64 {
	out := make(map[string]int64, len(outcomes))
	v, ok := c.vouchers.Load(id)
	for i, o := range outcomes {
		if ok {
			out[o] = v.(counts).load(i)
		} else {
			out[o] = 0
		}
	}
	return out
}

// addAt counts one answer of outcome i; a voucher not yet counted gets an
// entry unless the answer is that it does not exist.
func (c *ClaimCounter) addAt(id domain.VoucherID, i int, notFound bool) {
	v, ok := c.vouchers.Load(id)
	if !ok {
		if notFound {
			return
		}
		c.mu.Lock()
		if v, ok = c.vouchers.Load(id); !ok {
			if c.n >= MaxCountedVouchers {
				c.mu.Unlock()
				return
			}
			v = newCounts()
			c.vouchers.Store(id, v)
			c.n++
		}
		c.mu.Unlock()
	}
	v.(counts).add(i)
}

// ClaimAnswered counts one claim's answer; one given from the sold-out mark
// also counts as saved.
func (c *ClaimCounter) ClaimAnswered(id domain.VoucherID, answer error, fromMark bool) {
	if fromMark {
		c.saved.Add(1)
		c.addAt(id, soldOutIndex, false)
		return
	}
	outcome := outcomeOf(answer)
	c.addAt(id, outcomeIndex[outcome], outcome == domain.ErrVoucherNotFound.Code())
}

// Saved counts the claims answered from the sold-out mark, each a gate round
// trip not made (the metrics and the bench report it).
func (c *ClaimCounter) Saved() int64 { return c.saved.Load() }

func outcomeOf(err error) string {
	if err == nil {
		return OutcomeSuccess
	}
	var r *domain.Refusal
	if errors.As(err, &r) {
		if _, ok := outcomeIndex[r.Code()]; ok {
			return r.Code()
		}
	}
	if errors.Is(err, ports.ErrNotAdmitted) {
		return OutcomeBusy
	}
	return OutcomeError
}
