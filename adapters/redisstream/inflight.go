package redisstream

import (
	"maps"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// inflight is what this process has taken from Redis and not finished, and
// what Publish tells Receive. Receive, Publish, Ack, DeadLetter and the lease
// renewal all reach it, so it is the one state under a lock.
type inflight struct {
	mu        sync.Mutex
	buf       []buffered                // read from Redis, not yet handed out
	held      map[entryRef]struct{}     // every entry read and not yet finished
	published map[domain.VoucherID]bool // streams Publish wrote, to read at once
}

// buffered is a delivery with its entry, so that no Ref is parsed or built
// again on the way out.
type buffered struct {
	d   ports.Delivery
	ref entryRef
}

func newInflight() inflight {
	return inflight{held: map[entryRef]struct{}{}, published: map[domain.VoucherID]bool{}}
}

// notHeld keeps the messages of stream key this process does not hold yet.
// One it holds (a re-read, or a claim of an entry whose renewal was late) is
// in the buffer or with a worker: it must not be handed out twice.
func (f *inflight) notHeld(key string, msgs []redis.XMessage) []redis.XMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]redis.XMessage, 0, len(msgs))
	for _, m := range msgs {
		if _, ok := f.held[entryRef{key, m.ID}]; !ok {
			out = append(out, m)
		}
	}
	return out
}

// hold buffers deliveries to hand out and holds them until they are finished.
func (f *inflight) hold(bs []buffered) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range bs {
		f.held[b.ref] = struct{}{}
	}
	f.buf = append(f.buf, bs...)
}

// take hands out buffered deliveries, skipping any whose hold was lost to
// another consumer while they waited.
func (f *inflight) take(max int) []ports.Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ports.Delivery, 0, min(max, len(f.buf)))
	i := 0
	for ; i < len(f.buf) && len(out) < max; i++ {
		if _, ok := f.held[f.buf[i].ref]; ok {
			out = append(out, f.buf[i].d)
		}
	}
	f.buf = f.buf[i:]
	if len(f.buf) == 0 {
		f.buf = nil
	}
	return out
}

// release lets go of entries: finished, or no longer this consumer's.
func (f *inflight) release(refs []entryRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range refs {
		delete(f.held, r)
	}
}

// heldRefs lists every held entry.
func (f *inflight) heldRefs() []entryRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Keys(f.held))
}

// keeps tells whether this process has reason to read a stream the registry
// does not name: entries of it it holds, or a Publish to it not yet adopted.
func (f *inflight) keeps(s *stream) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.published[s.vid] {
		return true
	}
	for r := range f.held {
		if r.stream == s.key {
			return true
		}
	}
	return false
}

// notePublished marks a voucher's stream to be read from the next Receive on.
func (f *inflight) notePublished(vid domain.VoucherID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published[vid] = true
}

// takePublished hands Receive the streams published to since it last looked.
func (f *inflight) takePublished() map[domain.VoucherID]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	pub := f.published
	f.published = map[domain.VoucherID]bool{}
	return pub
}
