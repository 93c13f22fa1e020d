package redisstream

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
)

// streamState is where one stream is in its life as this Queue reads it:
//
//	new ──group made──▶ recovering ──own pending read──▶ reading
//	                                                     │   ▲
//	                                          NOGROUP ───┘   └── group made again ── lostGroup
//	reading ──Close, end taken──▶ draining ──read to that end──▶ drained
//
// Only recovering, reading, draining and drained streams have a group.
type streamState int

const (
	// stateNew: taken on, the group not yet known to exist; once it does,
	// this consumer's own leftovers are re-read first.
	stateNew streamState = iota
	// stateLostGroup: the group vanished (the stream was collected by another
	// instance, or deleted by hand). It is made again, and a new group holds
	// nothing pending to this consumer, so there is nothing to recover.
	stateLostGroup
	// stateRecovering: re-reading, from cursor, the entries the group still
	// counts as delivered to this consumer (from before a restart).
	stateRecovering
	// stateReading: claims from dead consumers and new entries.
	stateReading
	// stateDraining: after Close, read up to drainTo, the stream's last entry
	// when it was first drained.
	stateDraining
	// stateDrained: after Close, nothing more to read.
	stateDrained
)

// stream is one voucher's order stream as this Queue reads it. It belongs to
// the running Receive.
type stream struct {
	vid domain.VoucherID
	tag string // the stream's hash tag: "<vid>", or a bucket's "<vid>.<salt>"
	key string // the voucher's (or bucket's) order stream

	state   streamState
	cursor  string // stateRecovering: where the re-read of own entries goes on
	drainTo string // stateDraining: the last entry to read

	claimFrom string    // XAUTOCLAIM cursor, kept across states
	nextClaim time.Time // when the next XAUTOCLAIM pass may start

	// A read of this stream failed (on a cluster: its master is down or
	// failing over). It is left alone until retryAt while the streams of
	// the other masters are read on; fails counts the failures in a row.
	retryAt time.Time
	fails   int
}

// Backoff of a stream whose reads fail: short enough that a promoted
// replica (seconds) is read again at once, long enough that a dead master
// costs the streams of live ones no time.
const (
	streamRetryMin = 50 * time.Millisecond
	streamRetryMax = time.Second
)

// resting: the stream's last read failed and its retry is not due at now.
func (s *stream) resting(now time.Time) bool { return now.Before(s.retryAt) }

// watch reads the stream of tag from now on, unless it does already.
func (q *Queue) watch(vid domain.VoucherID, tag string) {
	if q.rd.streams[tag] == nil {
		q.rd.streams[tag] = &stream{vid: vid, tag: tag, key: redisschema.KeysForTag(q.opts.Prefix, tag).Orders, claimFrom: "0-0"}
	}
}

// grouped: the consumer group is known to exist on the stream.
func (s *stream) grouped() bool { return s.state >= stateRecovering }

// groupMade: the group exists (made now, or BUSYGROUP). A stream taken on for
// the first time re-reads its own leftovers, and a dead instance's may be due
// for a claim already.
func (s *stream) groupMade() {
	switch s.state {
	case stateNew:
		s.state, s.cursor = stateRecovering, "0"
		s.nextClaim = time.Time{}
	case stateLostGroup:
		s.state = stateReading
	}
}

// groupLost: a read answered NOGROUP; the group is made again before the next.
func (s *stream) groupLost() { s.state, s.cursor = stateLostGroup, "" }

// recovered: no own leftovers remain to re-read.
func (s *stream) recovered() { s.state, s.cursor = stateReading, "" }

// drainUpTo fixes, at the first drain, where draining stops: last is the
// stream's last entry ID then, "" for an empty stream.
func (s *stream) drainUpTo(last string) {
	if last == "" {
		s.state = stateDrained
		return
	}
	s.state, s.drainTo = stateDraining, last
}

// drained: read up to drainTo, or nothing more can be read (no group).
func (s *stream) drained() { s.state, s.drainTo = stateDrained, "" }

// entryRef names one entry; its String is the Delivery.Ref.
type entryRef struct{ stream, id string }

func (r entryRef) String() string { return r.stream + "/" + r.id }

// parseRef splits at the last '/': entry IDs have none, stream keys may.
func parseRef(ref string) (entryRef, error) {
	i := strings.LastIndexByte(ref, '/')
	if i <= 0 || i == len(ref)-1 {
		return entryRef{}, fmt.Errorf("redisstream: %q is not a delivery of this queue", ref)
	}
	return entryRef{stream: ref[:i], id: ref[i+1:]}, nil
}

// cmpID orders stream entry IDs ("<ms>-<seq>") numerically, for
// slices.SortFunc; an ID that does not parse sorts first. It compares IDs in
// Redis's form without parsing them (decimal "<ms>-<seq>", no leading zeros): the
// one whose ms has fewer digits is older; with the digits lined up, text
// order is number order; with the same ms, the shorter seq is older. ack.lua
// compares the same way.
func cmpID(a, b string) int {
	da, db := strings.IndexByte(a, '-'), strings.IndexByte(b, '-')
	switch {
	case !redisForm(a, da) || !redisForm(b, db):
		am, as := splitID(a)
		bm, bs := splitID(b)
		return cmp.Or(cmp.Compare(am, bm), cmp.Compare(as, bs))
	case da != db:
		return cmp.Compare(da, db)
	case len(a) == len(b) || a[:da] != b[:db]:
		return strings.Compare(a, b)
	}
	return cmp.Compare(len(a), len(b))
}

// redisForm: id, whose '-' is at dash, has two parts without leading zeros,
// as Redis writes IDs, so cmpID may compare it as text. Digits are not
// checked: an ID with other characters is none Redis hands out (XACK refuses
// it, and ack.lua refuses it as a bound).
func redisForm(id string, dash int) bool {
	return dash > 0 && dash < len(id)-1 &&
		(id[0] != '0' || dash == 1) && (id[dash+1] != '0' || dash == len(id)-2)
}

func splitID(id string) (uint64, uint64) {
	ms, seq, _ := strings.Cut(id, "-")
	m, _ := strconv.ParseUint(ms, 10, 64)
	s, _ := strconv.ParseUint(seq, 10, 64)
	return m, s
}
