package redissession

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Applying reports (mark, evict, queue) and reading reported sessions back.

// invalidate marks a session key reported and evicts its token, in one
// step under the guard (so no read in flight caches what it read before the
// write), and queues the token to be read back.
func (t *Sessions) invalidate(key string) {
	token := strings.TrimPrefix(key, t.store.prefix)
	t.guard.mu.Lock()
	t.guard.report(key)
	t.cache.Remove(token)
	t.guard.mu.Unlock()
	t.reports.Add(1)
	if t.queue != nil && usable(token) {
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
		select {
		case <-t.ctx.Done():
			return
		case token := <-t.queue:
			batch = append(batch[:0], token)
		}
		for len(batch) < prefetchBatch && len(t.queue) > 0 {
			batch = append(batch, <-t.queue) // this loop is the one reader: no wait
		}
		cached, skipped := t.readBack(t.ctx, t.store.rdb, batch)
		t.prefetched.Add(int64(cached))
		t.skipped.Add(int64(skipped))
	}
}

// readBack reads tokens' sessions through rdb (HGET and PTTL, no refresh:
// this is not a request of theirs) in one pipeline and caches those that
// exist, for as long as they live, as keep does (not when a report of the
// token arrived meanwhile or its slot's state moved). Tokens whose slot is
// not served are not read. It tells how many it cached and how many it
// skipped so. The read is bounded by readBackWait.
func (t *Sessions) readBack(ctx context.Context, rdb redis.Cmdable, tokens []string) (cached, skipped int) {
	type read struct {
		token string
		reading
		get *redis.StringCmd
		ttl *redis.DurationCmd
	}
	reads := make([]read, 0, len(tokens))
	seen := make(map[string]bool, len(tokens))
	for _, token := range tokens {
		if seen[token] {
			continue
		}
		seen[token] = true
		r, ok := t.begin(t.store.prefix + token)
		if !ok {
			skipped++
			continue
		}
		reads = append(reads, read{token: token, reading: r})
	}
	if len(reads) == 0 {
		return 0, skipped
	}

	ctx, cancel := context.WithTimeout(ctx, readBackWait)
	defer cancel()
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

	for i := range reads {
		r := &reads[i]
		id, err := parseUser(r.get)
		if err != nil {
			continue // gone, malformed, or unreadable: its request asks Redis
		}
		pttl, err := r.ttl.Result()
		if err != nil {
			continue
		}
		if life := t.store.lifeOf(pttl); life > 0 && t.keep(r.token, &r.reading, id, life) {
			cached++
		}
	}
	return cached, skipped
}
