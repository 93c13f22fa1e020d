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

func (t *Sessions) epoch(key string) *atomic.Uint64 {
	// FNV-1a: cheap, and spreads random tokens evenly.
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return &t.epochs[h%epochShards]
}

// pendingRead is a token some read-backs are reading.
type pendingRead struct {
	readers int  // the read-backs reading it
	dirty   bool // a report of it arrived since the first of them began
}

// invalidate evicts a session key's token and queues it to be read back.
// The epoch moves and a read-back in flight is marked first, so neither a
// lookup nor a read-back of that key caches what it read before the write.
func (t *Sessions) invalidate(key string) {
	t.epoch(key).Add(1)
	token := strings.TrimPrefix(key, t.store.prefix)
	if t.npending.Load() > 0 {
		t.pmu.Lock()
		if p := t.pending[token]; p != nil {
			p.dirty = true
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

// prefetchLoop reads reported tokens back, in batches of what has queued
// up meanwhile.
func (t *Sessions) prefetchLoop() {
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

// prefetch reads reported tokens back; those whose slot is not served are
// skipped (their request asks Redis).
func (t *Sessions) prefetch(tokens []string) {
	ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
	defer cancel()
	cached, skipped := t.readBack(ctx, t.store.rdb, tokens)
	t.prefetched.Add(int64(cached))
	t.skipped.Add(int64(skipped))
}

// readBack reads tokens' sessions through rdb (HGET and PTTL, no refresh:
// this is not a request of theirs) in one pipeline and caches those that
// exist, for as long as they live, unless a report of the token arrived
// meanwhile or its slot's state moved (its subscriber went down or came
// back). Tokens whose slot is not served are not read. It tells how many it
// cached and how many it skipped so.
//
// Several read-backs may run at once (prefetching and the warm-up of each
// master): a token they share is dirty for all of them once a report of it
// arrives, until the last of them is done.
func (t *Sessions) readBack(ctx context.Context, rdb redis.Cmdable, tokens []string) (cached, skipped int) {
	type read struct {
		token string
		slot  uint16
		state uint64
		get   *redis.StringCmd
		ttl   *redis.DurationCmd
	}
	reads := make([]read, 0, len(tokens))
	seen := make(map[string]bool, len(tokens))
	for _, token := range tokens {
		if seen[token] {
			continue
		}
		seen[token] = true
		slot, state, ok := t.servable(t.store.prefix + token)
		if !ok {
			skipped++
			continue
		}
		reads = append(reads, read{token: token, slot: slot, state: state})
	}
	if len(reads) == 0 {
		return 0, skipped
	}
	t.pmu.Lock()
	for _, r := range reads {
		p := t.pending[r.token]
		if p == nil {
			p = &pendingRead{}
			t.pending[r.token] = p
		}
		p.readers++
	}
	t.npending.Store(int64(len(t.pending)))
	t.pmu.Unlock()

	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range reads {
			key := t.store.prefix + reads[i].token
			reads[i].get = p.HGet(ctx, key, "id")
			reads[i].ttl = p.PTTL(ctx, key)
		}
		return nil
	})
	if t.afterRead != nil {
		t.afterRead()
	}

	t.pmu.Lock()
	defer t.pmu.Unlock()
	for _, r := range reads {
		p := t.pending[r.token]
		if p.readers--; p.readers == 0 {
			delete(t.pending, r.token)
		}
		if p.dirty || t.states[r.slot].Load() != r.state {
			continue
		}
		id, err := parseUser(r.get)
		if err != nil {
			continue // gone, malformed, or unreadable: its request asks Redis
		}
		pttl, err := r.ttl.Result()
		if err != nil {
			continue
		}
		if life := t.store.lifeOf(pttl); life > 0 {
			t.cache.AddFor(r.token, id, life, r.slot, r.state)
			cached++
		}
	}
	t.npending.Store(int64(len(t.pending)))
	return cached, skipped
}
