package redissession

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Applying reports (evict, mark, queue) and reading reported sessions back.

const epochShards = 64

func (t *Tracked) epoch(key string) *atomic.Uint64 {
	// FNV-1a: cheap, and spreads random tokens evenly.
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return &t.epochs[h%epochShards]
}

// invalidate evicts a session key's token and queues it to be read back.
// The epoch moves and a prefetch in flight is marked first, so neither a
// lookup nor a prefetch of that key caches what it read before the write.
func (t *Tracked) invalidate(key string) {
	t.epoch(key).Add(1)
	token := strings.TrimPrefix(key, t.store.prefix)
	if t.npending.Load() > 0 {
		t.pmu.Lock()
		if _, ok := t.pending[token]; ok {
			t.pending[token] = true
		}
		t.pmu.Unlock()
	}
	t.cache.Remove(token)
	t.reports.Add(1)
	if t.queue != nil && token != "" && len(token) <= maxTokenLen {
		select {
		case t.queue <- token:
		default:
			t.skipped.Add(1) // looked up on its first request instead
		}
	}
}

func (t *Tracked) flush() {
	for i := range t.epochs {
		t.epochs[i].Add(1)
	}
	t.pmu.Lock()
	for token := range t.pending {
		t.pending[token] = true
	}
	t.pmu.Unlock()
	t.cache.Purge()
}

// prefetchLoop reads reported tokens back, in batches of what has queued
// up meanwhile.
func (t *Tracked) prefetchLoop() {
	defer t.done.Done()
	batch := make([]string, 0, prefetchBatch)
	for {
		batch = batch[:0]
		select {
		case <-t.ctx.Done():
			return
		case token := <-t.queue:
			batch = append(batch, token)
		}
	more:
		for len(batch) < prefetchBatch {
			select {
			case token := <-t.queue:
				batch = append(batch, token)
			default:
				break more
			}
		}
		t.prefetch(batch)
	}
}

// prefetch reads tokens' sessions (HGET and PTTL, no refresh: this is not a
// request of theirs) in one pipeline and caches those that exist, for as
// long as they live, unless a report of the token arrived meanwhile.
func (t *Tracked) prefetch(tokens []string) {
	if t.down.Load() != 0 {
		t.skipped.Add(int64(len(tokens)))
		return
	}
	t.pmu.Lock()
	for _, token := range tokens {
		t.pending[token] = false
	}
	t.npending.Store(int64(len(t.pending)))
	t.pmu.Unlock()

	gets := make([]*redis.StringCmd, len(tokens))
	ttls := make([]*redis.DurationCmd, len(tokens))
	ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
	_, _ = t.store.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, token := range tokens {
			key := t.store.prefix + token
			gets[i] = p.HGet(ctx, key, "id")
			ttls[i] = p.PTTL(ctx, key)
		}
		return nil
	})
	cancel()
	if t.afterRead != nil {
		t.afterRead()
	}

	t.pmu.Lock()
	defer t.pmu.Unlock()
	serving := t.down.Load() == 0
	for i, token := range tokens {
		dirty, ok := t.pending[token]
		if !ok {
			continue // a duplicate in this batch, already handled
		}
		delete(t.pending, token)
		if dirty || !serving {
			continue
		}
		id, err := parseUser(gets[i])
		if err != nil {
			continue // gone, malformed, or unreadable: its request asks Redis
		}
		pttl, err := ttls[i].Result()
		if err != nil {
			continue
		}
		if life := t.store.lifeOf(pttl); life > 0 {
			t.cache.AddFor(token, id, life)
			t.prefetched.Add(1)
		}
	}
	t.npending.Store(int64(len(t.pending)))
}
