package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// HistoryLen is how many readings a voucher's history keeps: one a second,
// enough for a minute of rates (60 intervals), so a page opened mid-sale
// draws the last minute at once instead of starting empty.
const HistoryLen = 61

// MaxHistories bounds the vouchers with a history (each ~5 KiB): a page
// shows at most a dozen sales, and only vouchers that counted a claim within
// the window get one; a voucher past the bound still has its counts.
const MaxHistories = 64

// history is a ring of one voucher's readings; idle counts how many
// readings in a row found nothing new, so a quiet voucher's ring is dropped
// once its whole window is flat.
type history struct {
	at     [HistoryLen]time.Time
	counts [HistoryLen][]int64
	next   int // where the next reading goes
	n      int // readings held
	idle   int
}

// histories is the Counter's sampled past, written once a second by Sample
// and read by the page's first request; the claim path never takes its lock.
type histories struct {
	mu sync.Mutex
	m  map[domain.VoucherID]*history
	// quiet holds the total of each voucher whose ring was dropped, so it
	// gets a new one only once it counts a claim again.
	quiet map[domain.VoucherID]int64
}

// Sample takes one reading of every voucher counted. Run calls it every
// second; tests call it with their own times.
func (c *ClaimCounter) Sample(now time.Time) {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	if c.h.m == nil {
		c.h.m = make(map[domain.VoucherID]*history)
		c.h.quiet = make(map[domain.VoucherID]int64)
	}
	c.vouchers.Range(func(k, v any) bool {
		id, cs := k.(domain.VoucherID), v.(stripes)
		h := c.h.m[id]
		if h == nil {
			if was, ok := c.h.quiet[id]; ok && was == total(cs) {
				return true
			}
			if len(c.h.m) >= MaxHistories {
				return true
			}
			delete(c.h.quiet, id)
			h = &history{}
			for i := range h.counts {
				h.counts[i] = make([]int64, len(outcomes))
			}
			c.h.m[id] = h
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
			delete(c.h.m, id) // a flat minute: nothing to draw, room for another
			c.h.quiet[id] = total(cs)
		}
		return true
	})
}

// History returns the voucher's readings, oldest first; none when it has
// not counted a claim within the last minute (or is past MaxHistories).
func (c *ClaimCounter) History(id domain.VoucherID) ports.ClaimHistory {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	h := c.h.m[id]
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

// total is a voucher's answers of every outcome.
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
