package metrics

import (
	"errors"
	"sync"

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
var outcomes = outcomesWith(OutcomeBusy, OutcomeError)

var outcomeIndex = func() map[string]int {
	m := make(map[string]int, len(outcomes))
	for i, o := range outcomes {
		m[o] = i
	}
	return m
}()

// soldOutIndex is the sold-out outcome's place in a voucher's counters.
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
	vouchers sync.Map   // domain.VoucherID -> stripes, a counter per outcome
	n        int
	h        histories
	saved    stripes // one counter
}

func NewClaimCounter() *ClaimCounter { return &ClaimCounter{saved: newStripes(1)} }

// The claim's recorder (application.ClaimRecorder) is ClaimAnswered; infra
// hands the ClaimCounter to the claim, which checks it when it compiles.
var _ ports.ClaimCounts = (*ClaimCounter)(nil)

// Claims returns the voucher's counts so far; every outcome is present.
func (c *ClaimCounter) Claims(id domain.VoucherID) map[string]int64 {
	out := make(map[string]int64, len(outcomes))
	v, ok := c.vouchers.Load(id)
	for i, o := range outcomes {
		if ok {
			out[o] = v.(stripes).load(i)
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
			v = newStripes(len(outcomes))
			c.vouchers.Store(id, v)
			c.n++
		}
		c.mu.Unlock()
	}
	v.(stripes).add(i, 1)
}

// ClaimAnswered counts one claim's answer; one given from the sold-out mark
// also counts as saved.
func (c *ClaimCounter) ClaimAnswered(id domain.VoucherID, answer error, fromMark bool) {
	if fromMark {
		c.saved.add(0, 1)
		c.addAt(id, soldOutIndex, false)
		return
	}
	outcome := outcomeOf(answer)
	c.addAt(id, outcomeIndex[outcome], outcome == domain.ErrVoucherNotFound.Code())
}

// Saved counts the claims answered from the sold-out mark, each a gate round
// trip not made (the metrics and the bench report it).
func (c *ClaimCounter) Saved() int64 { return c.saved.load(0) }

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
