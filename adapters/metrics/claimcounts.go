package metrics

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Outcomes of the live page's counts besides a refusal's own code and OutcomeError.
const (
	OutcomeSuccess = "success"
	OutcomeBusy    = "busy" // not admitted: nothing changed, try again
)

// MaxCountedVouchers bounds the vouchers counted separately (a not_found answer never creates an entry).
const MaxCountedVouchers = 4096

var (
	outcomes     = outcomesWith(OutcomeBusy, OutcomeError) // the order of the per-voucher counters
	outcomeIndex = indexOf(outcomes)
	soldOutIndex = outcomeIndex[domain.ErrSoldOut.Code()]
)

func indexOf(list []string) map[string]int {
	m := make(map[string]int, len(list))
	for i, s := range list {
		m[s] = i
	}
	return m
}

// ClaimCounter counts in process the claims' answers per voucher and outcome
// (the live sale page) and those answered from the sold-out mark (the metrics).
// As the claim's application.ClaimRecorder it costs an atomic add or two, no lock once a voucher is known.
type ClaimCounter struct {
	mu       sync.Mutex // guards adding entries; reads go through the sync.Map
	vouchers sync.Map   // domain.VoucherID -> stripes, a counter per outcome
	n        int
	saved    stripes // one counter

	histMu sync.Mutex // the sampled past, written by Sample; the claim path never takes it
	hist   map[domain.VoucherID]*history
	quiet  map[domain.VoucherID]int64 // the total of each voucher whose ring was dropped until it counts again
}

func NewClaimCounter() *ClaimCounter {
	return &ClaimCounter{saved: newStripes(1), hist: map[domain.VoucherID]*history{}, quiet: map[domain.VoucherID]int64{}}
}

var _ ports.ClaimCounts = (*ClaimCounter)(nil)

// Claims returns the voucher's counts so far; every outcome is present.
func (c *ClaimCounter) Claims(id domain.VoucherID) map[string]int64 {
	out := make(map[string]int64, len(outcomes))
	v, ok := c.vouchers.Load(id)
	for i, o := range outcomes {
		out[o] = 0
		if ok {
			out[o] = v.(stripes).load(i)
		}
	}
	return out
}

// addAt counts one answer of outcome i; a new voucher gets an entry unless it does not exist.
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

// ClaimAnswered counts one claim's answer; one given from the sold-out mark also counts as saved.
func (c *ClaimCounter) ClaimAnswered(id domain.VoucherID, answer error, fromMark bool) {
	if fromMark {
		c.saved.add(0, 1)
		c.addAt(id, soldOutIndex, false)
		return
	}
	outcome := outcomeOf(answer)
	c.addAt(id, outcomeIndex[outcome], outcome == domain.ErrVoucherNotFound.Code())
}

// Saved counts the claims answered from the sold-out mark, each a gate round trip not made.
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

const (
	// HistoryLen is how many readings (one a second) a voucher's history keeps: a minute of rates.
	HistoryLen = 61
	// MaxHistories bounds the vouchers with a history; one past the bound still has its counts.
	MaxHistories = 64
)

// history is a ring of one voucher's readings; one flat for its whole window (idle) is dropped.
type history struct {
	at            [HistoryLen]time.Time
	counts        [HistoryLen][]int64
	next, n, idle int // where the next reading goes, readings held
}

// Sample takes one reading of every voucher counted (Run: every second).
func (c *ClaimCounter) Sample(now time.Time) {
	c.histMu.Lock()
	defer c.histMu.Unlock()
	c.vouchers.Range(func(k, v any) bool {
		id, cs := k.(domain.VoucherID), v.(stripes)
		h := c.hist[id]
		if h == nil {
			if was, ok := c.quiet[id]; (ok && was == total(cs)) || len(c.hist) >= MaxHistories {
				return true // still quiet, or no room for another
			}
			delete(c.quiet, id)
			h = &history{}
			for i := range h.counts {
				h.counts[i] = make([]int64, len(outcomes))
			}
			c.hist[id] = h
		}
		prev := h.counts[(h.next+HistoryLen-1)%HistoryLen]
		changed := h.n == 0
		slot := h.counts[h.next]
		for i := range outcomes {
			slot[i] = cs.load(i)
			changed = changed || slot[i] != prev[i]
		}
		h.at[h.next] = now
		h.next = (h.next + 1) % HistoryLen
		h.n = min(h.n+1, HistoryLen)
		if changed {
			h.idle = 0
		} else if h.idle++; h.idle >= HistoryLen {
			delete(c.hist, id) // a flat minute: nothing to draw, room for another
			c.quiet[id] = total(cs)
		}
		return true
	})
}

// History returns the voucher's readings, oldest first; none when it has not
// counted a claim within the last minute (or is past MaxHistories).
func (c *ClaimCounter) History(id domain.VoucherID) ports.ClaimHistory {
	c.histMu.Lock()
	defer c.histMu.Unlock()
	h := c.hist[id]
	if h == nil {
		return ports.ClaimHistory{}
	}
	out := ports.ClaimHistory{At: make([]time.Time, 0, h.n), Claims: make(map[string][]int64, len(outcomes))}
	for _, o := range outcomes {
		out.Claims[o] = make([]int64, 0, h.n)
	}
	for k := 0; k < h.n; k++ {
		i := (h.next - h.n + k + HistoryLen) % HistoryLen
		out.At = append(out.At, h.at[i])
		for j, o := range outcomes {
			out.Claims[o] = append(out.Claims[o], h.counts[i][j])
		}
	}
	return out
}

func total(cs stripes) int64 {
	var n int64
	for i := range outcomes {
		n += cs.load(i)
	}
	return n
}

// Run samples every second until ctx ends.
func (c *ClaimCounter) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			c.Sample(now)
		case <-ctx.Done():
			return
		}
	}
}
