package redisstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// New entries are read with the reply left raw (go-redis's RawCmd) and walked
// here, because go-redis's typed XREADGROUP builds a map per entry, with a
// string for each field name and value, each boxed: ten allocations per
// order, and about 0.5 µs of the consumer's CPU per order in
// BenchmarkReceiveAck. Walking the raw reply, an entry costs its ID and one
// slice of its fields, which point into the reply. Only the reply of
// XREADGROUP is walked here; every other command keeps its typed reply.

// message is a stream entry as read: its ID and its fields as name, value,
// name, value... (nil when the entry was deleted while pending).
type message struct {
	ID     string
	fields [][]byte
}

// messagesOf turns go-redis's typed entries into messages.
func messagesOf(msgs []redis.XMessage) []message {
	out := make([]message, len(msgs))
	for i, m := range msgs {
		out[i].ID = m.ID
		if len(m.Values) > 0 {
			out[i].fields = make([][]byte, 0, 2*len(m.Values))
			for k, v := range m.Values {
				out[i].fields = append(out[i].fields, []byte(k), fmt.Append(nil, v))
			}
		}
	}
	return out
}

// value is the message's last value of field, as go-redis's map keeps it.
func (m message) value(field string) ([]byte, bool) {
	var v []byte
	ok := false
	for i := 0; i+1 < len(m.fields); i += 2 {
		if string(m.fields[i]) == field {
			v, ok = m.fields[i+1], true
		}
	}
	return v, ok
}

// streamReply is one stream of an XREADGROUP reply.
type streamReply struct {
	key  string
	msgs []message
}

// replyError is an error Redis answered in a raw reply; it is a redis.Error,
// so redis.HasErrorPrefix (NOGROUP) sees it as go-redis's own.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

// errMalformed wraps every reply the walk cannot read.
var errMalformed = errors.New("redisstream: malformed XREADGROUP reply")

// xreadgroupRaw is XREADGROUP of new entries with the reply left raw, and
// without BLOCK: a raw command has no read timeout of its own, so a wait
// would run into the client's (waits use the typed command).
func (q *Queue) xreadgroupRaw(ctx context.Context, streams []string, count int) *redis.RawCmd {
	args := make([]any, 0, 7+len(streams))
	args = append(args, "XREADGROUP", "GROUP", q.opts.Group, q.opts.Consumer, "COUNT", count, "STREAMS")
	for _, s := range streams {
		args = append(args, s)
	}
	return redis.NewRawCmd(ctx, args...)
}

// parseStreams walks an XREADGROUP reply, RESP2 (an array of [key, entries]
// pairs) or RESP3 (a map of key to entries); nil for no entries. An error
// reply is returned as a replyError.
func parseStreams(raw []byte) ([]streamReply, error) {
	r := respReader{b: raw}
	if len(raw) > 0 && raw[0] == '-' {
		line, err := r.line()
		if err != nil {
			return nil, err
		}
		return nil, replyError(line[1:])
	}
	isMap := len(raw) > 0 && raw[0] == '%'
	n, err := r.aggregate()
	if err != nil || n <= 0 {
		return nil, err
	}
	if isMap {
		n /= 2
	}
	out := make([]streamReply, 0, n)
	for range n {
		if !isMap {
			if pair, err := r.aggregate(); err != nil || pair != 2 {
				return nil, r.malformed(err, "a stream is not a key and its entries")
			}
		}
		key, err := r.bulk()
		if err != nil || key == nil {
			return nil, r.malformed(err, "a stream has no key")
		}
		m, err := r.aggregate()
		if err != nil {
			return nil, err
		}
		s := streamReply{key: string(key), msgs: make([]message, 0, max(m, 0))}
		for range m {
			msg, err := r.message()
			if err != nil {
				return nil, err
			}
			s.msgs = append(s.msgs, msg)
		}
		out = append(out, s)
	}
	if r.pos != len(raw) {
		return nil, r.malformed(nil, "bytes after the reply")
	}
	return out, nil
}

// respReader walks one raw RESP2 or RESP3 reply.
type respReader struct {
	b   []byte
	pos int
}

func (r *respReader) malformed(err error, what string) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: %s (at byte %d)", errMalformed, what, r.pos)
}

// line returns the next line, its type byte first, without the CRLF.
func (r *respReader) line() ([]byte, error) {
	i := bytes.Index(r.b[r.pos:], []byte("\r\n"))
	if i < 1 {
		return nil, r.malformed(nil, "a line without its type or its end")
	}
	l := r.b[r.pos : r.pos+i]
	r.pos += i + 2
	return l, nil
}

// length reads the decimal count of a header line.
func (r *respReader) length(l []byte) (int, error) {
	n, err := strconv.Atoi(string(l[1:]))
	if err != nil || n < -1 {
		return 0, r.malformed(nil, "a length that is not a count")
	}
	return n, nil
}

// aggregate reads an array or map header: its element count (a map's
// doubled), -1 for null. Every element takes at least three bytes, so a
// count beyond what is left of the reply is refused before anything is
// made for it.
func (r *respReader) aggregate() (int, error) {
	l, err := r.line()
	if err != nil {
		return 0, err
	}
	var n int
	switch l[0] {
	case '_':
		return -1, nil
	case '*':
		n, err = r.length(l)
	case '%':
		n, err = r.length(l)
		if n > 0 && n <= len(r.b) {
			n *= 2
		}
	default:
		return 0, r.malformed(nil, "not an array")
	}
	if err != nil || n > len(r.b)-r.pos {
		return 0, r.malformed(err, "an array longer than the reply")
	}
	return n, nil
}

// bulk reads a bulk or simple string, nil for null.
func (r *respReader) bulk() ([]byte, error) {
	l, err := r.line()
	if err != nil {
		return nil, err
	}
	switch l[0] {
	case '_':
		return nil, nil
	case '+':
		return l[1:], nil
	case '$':
		n, err := r.length(l)
		if err != nil || n < 0 {
			return nil, err
		}
		if n > len(r.b)-r.pos-2 || !bytes.Equal(r.b[r.pos+n:r.pos+n+2], []byte("\r\n")) {
			return nil, r.malformed(nil, "a string longer than the reply")
		}
		v := r.b[r.pos : r.pos+n : r.pos+n]
		r.pos += n + 2
		return v, nil
	}
	return nil, r.malformed(nil, "not a string")
}

// message reads one entry: [ID, [name, value, ...] or null].
func (r *respReader) message() (message, error) {
	if n, err := r.aggregate(); err != nil || n != 2 {
		return message{}, r.malformed(err, "an entry is not an ID and its fields")
	}
	id, err := r.bulk()
	if err != nil || id == nil {
		return message{}, r.malformed(err, "an entry has no ID")
	}
	msg := message{ID: string(id)}
	n, err := r.aggregate()
	if err != nil {
		return message{}, err
	}
	if n < 0 {
		return msg, nil // deleted while pending
	}
	if n%2 != 0 {
		return message{}, r.malformed(nil, "an entry's fields are not name, value pairs")
	}
	if n > 0 {
		msg.fields = make([][]byte, n)
		for i := range n {
			if msg.fields[i], err = r.bulk(); err != nil {
				return message{}, err
			}
		}
	}
	return msg, nil
}
