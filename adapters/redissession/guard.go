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

// guard is the cache's one rule against a read that a report overtakes,
// for every read of a session (a request's miss, a prefetch, the warm-up):
// a read caches what it read only if no report of its key arrived since it
// began. A report marks its key and evicts its token under mu, a read
// checks and adds under mu: a report either precedes the check (the read
// adds nothing) or follows the add (and evicts it), so an answer read
// before a reported write is never served once the report is applied.
//
// The marks are words picked by a hash of the key, each holding how many
// reports hashed there (n), a tag of the last reported key (other bits of
// its hash), and n before that key's run of reports began (the original's
// login reports its key twice: HSET, EXPIRE). A read caches if the reports
// in its word since it began are all of one key, not its own: it refuses
// when its key was reported, and otherwise only when two other keys of its
// word were, about (k/guardWords)²/2 of reads with k keys reported during
// one (2·10⁻⁵ at k = 100). So read-backs, which run while logins are
// reported in bursts, cache almost all they read, as with a record per
// token (a bare count per word would refuse one at every login into it),
// yet nothing is recorded per read, which would cost each miss a lock or an
// allocation: a read begins lock-free and takes the lock once to cache. A
// tag two keys share only refuses a read; n would have to wrap (65,536
// reports in one word during one read) to admit one wrongly.
type guard struct {
	mu    sync.Mutex
	words [guardWords]atomic.Uint64 // n<<48 | run's start<<32 | tag, written under mu
}

const guardWords = 1 << 14 // 128 KiB

// guardSeed keys the hash: random per process, so no one can choose tokens
// that share a word with another user's.
var guardSeed = maphash.MakeSeed()

// word is key's word and tag.
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

// reading is a read in flight: its slot, the slot's state and its key's
// word when it began, and its key's tag.
type reading struct {
	slot       uint16
	state, was uint64
	word       *atomic.Uint64
	tag        uint32
}

// quiet tells whether no report of r's key arrived since r began: those
// since, if any, are all in the last key's run, not r's. The caller holds mu.
func (r *reading) quiet() bool {
	now := r.word.Load()
	since, run := uint16(now>>48)-uint16(r.was>>48), uint16(now>>48)-uint16(now>>32)
	return since == 0 || since <= run && uint32(now) != r.tag
}

// begin starts a read of key, before it is sent; ok is false when key's
// slot is not served: what such a read finds is not cached.
func (t *Sessions) begin(key string) (r reading, ok bool) {
	r.slot = redisschema.Slot(key)
	r.state = t.states[r.slot].Load()
	r.word, r.tag = t.guard.word(key)
	r.was = r.word.Load()
	return r, r.state&slotDown == 0
}

// keep caches token's answer for life, as r read it, unless the guard
// refuses it or the slot's state moved since (its entry would never be
// served); it tells whether it cached. It replaces the token's entry, which
// passed the same check: both are current until the next report.
func (t *Sessions) keep(token string, r *reading, id domain.UserID, life time.Duration) bool {
	t.guard.mu.Lock()
	defer t.guard.mu.Unlock()
	if !r.quiet() || t.states[r.slot].Load() != r.state {
		return false
	}
	t.cache.AddFor(token, id, life, r.slot, r.state)
	return true
}

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

// prefetchLoop reads reported tokens back (no refresh), in batches of what
// has queued up meanwhile, and caches them for as long as their sessions
// live: a login costs each instance one pipelined read. The queue is
// bounded; a token that does not fit is looked up on its first request.
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
// this is not a request of theirs) in one pipeline, bounded by readBackWait,
// and caches those that exist for as long as they live, through keep. Tokens whose slot is
// not served are not read. It tells how many it cached and how many it
// skipped so.
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
		// Gone, malformed, or unreadable: its request asks Redis.
		id, pttl, err := parse(r.get, r.ttl)
		if life := t.store.lifeOf(pttl); err == nil && life > 0 && t.keep(r.token, &r.reading, id, life) {
			cached++
		}
	}
	return cached, skipped
}
