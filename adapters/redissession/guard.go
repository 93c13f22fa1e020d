package redissession

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// guard keeps every read of a session (a miss, a prefetch, the warm-up) from
// caching what it read if a report of its key arrived since it began: a report
// marks its key and evicts its token under mu, a read checks and adds under mu.
//
// A key's mark is a word picked by a hash: n (reports that hashed there), a tag
// of the last reported key, and n when that key's run of reports began (a
// login reports its key twice). A read caches if the reports in its word since
// it began are all of one other key; it wrongly refuses about (k/guardWords)²/2
// of reads with k keys reported during one. Nothing is recorded per read, so a
// miss costs no lock or allocation until it caches; n would have to wrap
// (65,536 reports in one word during one read) to admit a read wrongly.
type guard struct {
	mu    sync.Mutex
	words [guardWords]atomic.Uint64 // n<<48 | run's start<<32 | tag, written under mu
}

const guardWords = 1 << 14 // 128 KiB

// guardSeed is random per process, so no one can choose tokens that share a
// word with another user's.
var guardSeed = maphash.MakeSeed()

func (g *guard) word(key string) (*atomic.Uint64, uint32) {
	h := maphash.String(guardSeed, key)
	return &g.words[h%guardWords], uint32(h >> 32)
}

// report marks a report of key. The caller holds mu.
func (g *guard) report(key string) {
	w, tag := g.word(key)
	old := w.Load()
	n, from := uint16(old>>48)+1, uint16(old>>32)
	if uint32(old) != tag {
		from = n - 1 // this key's run begins
	}
	w.Store(uint64(n)<<48 | uint64(from)<<32 | uint64(tag))
}

// reading is a read in flight: its slot, the slot's state and its key's word
// when it began, and its key's tag.
type reading struct {
	slot       uint16
	state, was uint64
	word       *atomic.Uint64
	tag        uint32
}

// quiet tells whether the reports since r began, if any, are all in the last
// key's run, not r's. The caller holds mu.
func (r *reading) quiet() bool {
	now := r.word.Load()
	since, run := uint16(now>>48)-uint16(r.was>>48), uint16(now>>48)-uint16(now>>32)
	return since == 0 || since <= run && uint32(now) != r.tag
}

// begin starts a read of key, before it is sent; ok is false when key's slot
// is not served (what the read finds is not cached).
func (t *Sessions) begin(key string) (r reading, ok bool) {
	r.slot = redisschema.Slot(key)
	r.state = t.states[r.slot].Load()
	r.word, r.tag = t.guard.word(key)
	r.was = r.word.Load()
	return r, r.state&slotDown == 0
}

// keep caches token's answer for life unless the guard refuses it or the
// slot's state moved since r began; it tells whether it cached.
func (t *Sessions) keep(token string, r *reading, id domain.UserID, life time.Duration) bool {
	t.guard.mu.Lock()
	defer t.guard.mu.Unlock()
	if !r.quiet() || t.states[r.slot].Load() != r.state {
		return false
	}
	t.cache.AddFor(token, id, life, r.slot, r.state)
	return true
}

// invalidate marks a reported key and evicts its token in one step under the
// guard, and queues the token to be read back.
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

// prefetchLoop reads reported tokens back in batches of what has queued up
// meanwhile: a login costs each instance one pipelined read.
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
			batch = append(batch, <-t.queue) // the one reader: no wait
		}
		cached, skipped := t.readBack(t.ctx, t.store.rdb, batch)
		t.prefetched.Add(int64(cached))
		t.skipped.Add(int64(skipped))
	}
}

// readBack reads tokens' sessions through rdb (HGET and PTTL, no refresh: not
// a request of theirs) in one pipeline and caches those that live, through
// keep. Tokens whose slot is not served are skipped.
func (t *Sessions) readBack(ctx context.Context, rdb redis.Cmdable, tokens []string) (cached, skipped int) {
	type read struct {
		token string
		reading
		get *redis.StringCmd
		ttl *redis.DurationCmd
	}
	ctx, cancel := context.WithTimeout(ctx, readBackWait)
	defer cancel()
	p := rdb.Pipeline()
	reads := make([]read, 0, len(tokens))
	seen := make(map[string]bool, len(tokens))
	for _, token := range tokens {
		if seen[token] {
			continue
		}
		seen[token] = true
		key := t.store.prefix + token
		if r, ok := t.begin(key); ok {
			reads = append(reads, read{token, r, p.HGet(ctx, key, "id"), p.PTTL(ctx, key)})
		} else {
			skipped++
		}
	}
	if len(reads) == 0 {
		return 0, skipped
	}
	_, _ = p.Exec(ctx)
	if t.afterRead != nil {
		t.afterRead()
	}
	for i := range reads {
		r := &reads[i]
		id, pttl, err := parse(r.get, r.ttl) // an unreadable one is asked for on its request
		if life := t.store.lifeOf(pttl); err == nil && life > 0 && t.keep(r.token, &r.reading, id, life) {
			cached++
		}
	}
	return cached, skipped
}
