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
	stateNew        streamState = iota
	stateLostGroup              // the group vanished; one made anew holds nothing pending to recover
	stateRecovering             // re-reading, from cursor, what the group counts as delivered to this consumer
	stateReading                // claims from dead consumers and new entries
	stateDraining               // after Close, read up to drainTo, the stream's end when first drained
	stateDrained
)

// stream is one voucher's (or bucket's) order stream; it belongs to the running Receive.
type stream struct {
	vid domain.VoucherID
	tag string // "<vid>", or a bucket's "<vid>.<salt>"
	key string

	state     streamState
	cursor    string    // stateRecovering
	drainTo   string    // stateDraining
	claimFrom string    // XAUTOCLAIM cursor, kept across states
	nextClaim time.Time // when the next XAUTOCLAIM pass may start

	retryAt time.Time // a failed read (on a cluster: its master down) rests the stream until then
	fails   int       // in a row
}

// Backoff of a failing stream: a promoted replica is read soon, a dead master costs the others nothing.
const streamRetryMin, streamRetryMax = 50 * time.Millisecond, time.Second

func (s *stream) resting(now time.Time) bool { return now.Before(s.retryAt) }

// watch reads the stream of tag from now on, unless it does already.
func (q *Queue) watch(vid domain.VoucherID, tag string) {
	if q.rd.streams[tag] == nil {
		q.rd.streams[tag] = &stream{vid: vid, tag: tag, key: redisschema.KeysForTag(q.opts.Prefix, tag).Orders, claimFrom: "0-0"}
	}
}

func (s *stream) grouped() bool { return s.state >= stateRecovering }

// groupMade: a new stream re-reads its own leftovers, and a dead instance's may be due for a claim.
func (s *stream) groupMade() {
	switch s.state {
	case stateNew:
		s.state, s.cursor = stateRecovering, "0"
		s.nextClaim = time.Time{}
	case stateLostGroup:
		s.state = stateReading
	}
}

func (s *stream) groupLost() { s.state, s.cursor = stateLostGroup, "" }

func (s *stream) recovered() { s.state, s.cursor = stateReading, "" }

// drainUpTo fixes where draining stops: the stream's last ID, "" when empty.
func (s *stream) drainUpTo(last string) {
	if last == "" {
		s.state = stateDrained
		return
	}
	s.state, s.drainTo = stateDraining, last
}

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

// cmpID orders entry IDs ("<ms>-<seq>") numerically, an unparsable one first. Like ack.lua it compares
// IDs in Redis's form as text: fewer ms digits is older; digits lined up, text order is number order.
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

// redisForm: id (its '-' at dash) has two parts without leading zeros; digits are not checked.
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
