package redissession

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// DefaultWarmDuty is the fraction of the time a master's warm-up keeps a
	// request to Redis in flight: a busy Redis answers later, so the warm-up
	// slows down with it instead of competing with a stampede.
	DefaultWarmDuty = 0.1
	warmScanCount   = 256 // SCAN's COUNT; what one round finds is read in one pipeline
	warmRetry       = 100 * time.Millisecond
	warmRetryMax    = 3 * time.Second
)

type warmUp struct {
	on                  bool          // under Sessions.mu: Warm was called
	ended               chan struct{} // closed when every first warm-up has ended
	cached, read, scans atomic.Int64
}

// WarmProgress tells how far the warm-up went.
type WarmProgress struct {
	// Cached is how many sessions warm-ups cached; Read how many they read;
	// Scans how many SCANs they sent.
	Cached, Read, Scans int64
	// Done: the warm-up of each master that listened when Warm was called has
	// ended (read all, filled its share, or stopped).
	Done bool
}

// Warm starts reading, in the background, the sessions of every master whose
// subscriber listens (SCAN, then readBack), each up to its share of the cache
// size (by the slots it serves), at the pace of DefaultWarmDuty. From then on a
// master whose subscriber comes back, or that takes slots, is read again. A
// second call does nothing; Close stops it.
func (t *Sessions) Warm() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.warm.on || t.closed {
		return
	}
	t.warm.on = true
	var first sync.WaitGroup
	for _, s := range t.subs {
		if s.up {
			first.Add(1)
			t.startWarm(s, first.Done)
		}
	}
	t.done.Add(1)
	go func() {
		defer t.done.Done()
		first.Wait()
		close(t.warm.ended)
	}()
}

func (t *Sessions) WarmProgress() WarmProgress {
	p := WarmProgress{Cached: t.warm.cached.Load(), Read: t.warm.read.Load(), Scans: t.warm.scans.Load()}
	select {
	case <-t.warm.ended:
		p.Done = true
	default:
	}
	return p
}

// WarmedUp is closed once the warm-up Warm started is done.
func (t *Sessions) WarmedUp() <-chan struct{} { return t.warm.ended }

// startWarm starts reading s's master, in place of a warm-up of it that still
// runs, and calls ended when it ends. The caller holds t.mu.
func (t *Sessions) startWarm(s *subscriber, ended func()) {
	stopWarm(s)
	share := t.size * s.owns / slotCount
	if share <= 0 {
		ended()
		return
	}
	ctx, cancel := context.WithCancel(t.ctx)
	s.warmCancel = cancel
	t.done.Add(1)
	go func() {
		defer t.done.Done()
		defer ended()
		defer cancel()
		t.warmMaster(ctx, s.addr, share)
	}()
}

// stopWarm stops the warm-up of s's master. The caller holds t.mu.
func stopWarm(s *subscriber) {
	if s.warmCancel != nil {
		s.warmCancel()
		s.warmCancel = nil
	}
}

// warmMaster reads the sessions of the master at addr until it has cached
// share of them, SCAN has visited every key, or ctx ends. Its connection is its
// own, so the reads go to that master even on a cluster (a key whose slot
// moved answers MOVED and is not cached), and the service's pools are spared.
func (t *Sessions) warmMaster(ctx context.Context, addr string, share int) {
	c := redis.NewClient(t.nodeOptions(addr))
	defer func() { _ = c.Close() }()
	prefix := t.store.prefix
	match := globQuoter.Replace(prefix) + "*"
	var cursor uint64
	cached, failed := 0, 0
	for ctx.Err() == nil {
		began := time.Now()
		keys, next, err := c.Scan(ctx, cursor, match, warmScanCount).Result()
		if err == nil && t.scanFault != nil {
			err = t.scanFault()
		}
		t.warm.scans.Add(1)
		if err != nil {
			// The connection may be up (the subscriber would stop the warm-up
			// otherwise): retry the same page, backing off.
			failed++
			if failed == 1 {
				t.log.Warn().Err(err).Str("master", addr).Int("cached", cached).
					Msg("session warm-up: reading sessions failed; retrying")
			}
			sleep(ctx, min(warmRetry<<min(failed-1, 5), warmRetryMax))
			continue
		}
		if failed > 0 {
			t.log.Info().Str("master", addr).Int("failures", failed).Msg("session warm-up: reading sessions again")
			failed = 0
		}
		tokens := make([]string, 0, len(keys))
		for _, k := range keys {
			if tok := strings.TrimPrefix(k, prefix); usable(tok) {
				tokens = append(tokens, tok)
			}
		}
		if room := share - cached; len(tokens) > room {
			tokens = tokens[:room]
		}
		n, _ := t.readBack(ctx, c, tokens)
		cached += n
		t.warm.cached.Add(int64(n))
		t.warm.read.Add(int64(len(tokens)))
		if next == 0 || cached >= share {
			return
		}
		cursor = next
		sleep(ctx, time.Duration(float64(time.Since(began))*(1/t.warmDuty-1)))
	}
}

// globQuoter quotes the characters SCAN's MATCH reads as a pattern.
var globQuoter = strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`, `\`, `\\`)
