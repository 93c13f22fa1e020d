package redisstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/test/testenv"
)

// fieldMap is a message's fields as go-redis's map has them (last wins).
func fieldMap(m message) map[string]string {
	if m.fields == nil {
		return nil
	}
	out := map[string]string{}
	for i := 0; i+1 < len(m.fields); i += 2 {
		out[string(m.fields[i])] = string(m.fields[i+1])
	}
	return out
}

func TestParseStreamsReadsBothProtocols(t *testing.T) {
	entries := "*2\r\n$3\r\n1-0\r\n*4\r\n$2\r\nid\r\n$2\r\n77\r\n$6\r\nuserId\r\n$1\r\n5\r\n" +
		"*2\r\n$3\r\n1-1\r\n%s\r\n" // the second entry deleted while pending
	for _, tt := range []struct {
		name, raw string
	}{
		{"resp2", "*1\r\n*2\r\n$1\r\ns\r\n*2\r\n" + fmt.Sprintf(entries, "*-1")},
		{"resp3", "%1\r\n$1\r\ns\r\n*2\r\n" + fmt.Sprintf(entries, "_")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStreams([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].key != "s" || len(got[0].msgs) != 2 {
				t.Fatalf("got %+v, want stream s with 2 entries", got)
			}
			m0, m1 := got[0].msgs[0], got[0].msgs[1]
			if m0.ID != "1-0" || !maps.Equal(fieldMap(m0), map[string]string{"id": "77", "userId": "5"}) {
				t.Fatalf("first entry %s %v", m0.ID, fieldMap(m0))
			}
			if m1.ID != "1-1" || m1.fields != nil {
				t.Fatalf("second entry %s %q, want 1-1 without fields", m1.ID, m1.fields)
			}
		})
	}
	for _, null := range []string{"*-1\r\n", "_\r\n", "*0\r\n", "%0\r\n"} {
		if got, err := parseStreams([]byte(null)); err != nil || len(got) != 0 {
			t.Fatalf("parseStreams(%q) = %v, %v, want no entries", null, got, err)
		}
	}
	_, err := parseStreams([]byte("-NOGROUP No such key 's' or consumer group 'g'\r\n"))
	if !isNoGroup(err) || !isReplyError(err) {
		t.Fatalf("an error reply gave %v, want a redis error NOGROUP", err)
	}
	for _, bad := range []string{
		"", "*", "*1\r\n", "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*1\r\n$1\r\na\r\n", // odd fields
		"*1\r\n*2\r\n$9\r\ns\r\n*0\r\n",      // a string longer than the reply
		"*99999999999\r\n",                   // a count beyond the reply
		"%4611686018427387904\r\n",           // a map count that would overflow when doubled
		"*1\r\n*2\r\n$1\r\ns\r\n*0\r\nextra", // bytes after the reply
		"*1\r\n*2\r\n:1\r\n*0\r\n",           // a key that is not a string
		"*1\r\n*2\r\n$1\r\nsXX*0\r\n",        // a string without its CRLF
	} {
		if _, err := parseStreams([]byte(bad)); !errors.Is(err, errMalformed) {
			t.Fatalf("parseStreams(%q) = %v, want errMalformed", bad, err)
		}
	}
}

// The raw walk and go-redis's typed reply agree on what a real server sends:
// the same IDs and fields, on every backend, whatever the entries hold.
func TestRawReadAgreesWithGoRedis(t *testing.T) {
	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			ctx := context.Background()
			prefix := testenv.KeyPrefix(t)
			key := redisschema.KeysFor(prefix, 7).Orders
			testenv.DropPrefix(t, rdb, prefix)
			q, err := New(rdb, Options{Prefix: prefix, Consumer: "c1"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = q.Close() })
			values := [][]any{
				redisschema.EncodeOrder(order(t, 1, 7)),
				append(redisschema.EncodeOrder(order(t, 2, 7)), "extra", "x y\r\nz"),
				{"id", "3", "userId", "3", "voucherId", "7", "id", "33"}, // a name twice
				{"junk", ""},
				{"id", strings.Repeat("9", 300), "userId", "é", "voucherId", "7"},
			}
			for _, v := range values {
				if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: v}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for _, g := range []string{"raw", "typed"} {
				if err := rdb.XGroupCreate(ctx, key, g, "0").Err(); err != nil {
					t.Fatal(err)
				}
			}
			q.opts.Group = "raw"
			c := q.xreadgroupRaw(ctx, []string{key, ">"}, 10)
			_ = rdb.Process(ctx, c)
			raw, err := c.Result()
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseStreams(raw)
			if err != nil {
				t.Fatal(err)
			}
			want, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "typed", Consumer: "c1",
				Streams: []string{key, ">"}, Count: 10, Block: -1}).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || len(want) != 1 || got[0].key != want[0].Stream || len(got[0].msgs) != len(values) {
				t.Fatalf("raw %+v, typed %+v", got, want)
			}
			for i, w := range want[0].Messages {
				g := got[0].msgs[i]
				typed := map[string]string{}
				for k, v := range w.Values {
					typed[k] = v.(string)
				}
				if g.ID != w.ID || !maps.Equal(fieldMap(g), typed) {
					t.Fatalf("entry %d: raw %s %v, typed %s %v", i, g.ID, fieldMap(g), w.ID, typed)
				}
				o, err := redisschema.DecodeOrderFields(7, g.fields)
				wo, werr := redisschema.DecodeOrder(7, w)
				if o != wo || (err == nil) != (werr == nil) {
					t.Fatalf("entry %d decodes to %v, %v raw and %v, %v typed", i, o, err, wo, werr)
				}
			}
		})
	}
}

// An error Redis answers to the raw read (a cluster's MOVED while a slot
// moves) is invisible to go-redis, which would neither follow it nor reload
// its slot map: the read is asked again the typed way, and the entries come.
func TestRawReadAnsweredWithAnErrorIsAskedAgainTheTypedWay(t *testing.T) {
	for _, b := range testenv.Redises() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			moved := &movedOnce{}
			rdb.AddHook(moved)
			q := newTestQueue(t, rdb, testenv.KeyPrefix(t), nil)
			ctx := context.Background()
			want := order(t, 1, 7)
			if err := q.Publish(ctx, want); err != nil {
				t.Fatal(err)
			}
			ds, err := q.Receive(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			if !moved.done || len(ds) != 1 || ds[0].Order != want {
				t.Fatalf("got %v (a MOVED injected: %v), want %v", ds, moved.done, want)
			}
		})
	}
}

// movedOnce answers the first raw XREADGROUP with MOVED, without sending it.
type movedOnce struct{ done bool }

func (*movedOnce) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *movedOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if raw, ok := cmd.(*redis.RawCmd); ok && !h.done && strings.EqualFold(cmd.Name(), "xreadgroup") {
			h.done = true
			raw.SetVal([]byte("-MOVED 3999 127.0.0.1:1\r\n"))
			return nil
		}
		return next(ctx, cmd)
	}
}
func (*movedOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// FuzzParseStreams: whatever the bytes, the walk does not panic, and what it
// accepts, written out again as RESP2, reads back the same.
func FuzzParseStreams(f *testing.F) {
	f.Add([]byte("%1\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$2\r\nid\r\n$1\r\n7\r\n"))
	f.Add([]byte("*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*-1\r\n"))
	f.Add([]byte("-NOGROUP x\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := parseStreams(raw)
		if err != nil {
			var re replyError
			if !errors.Is(err, errMalformed) && !errors.As(err, &re) {
				t.Fatalf("parseStreams(%q): error %v is neither malformed nor a reply error", raw, err)
			}
			return
		}
		var b strings.Builder
		bulk := func(s []byte) { fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(s), s) }
		fmt.Fprintf(&b, "*%d\r\n", len(got))
		for _, s := range got {
			b.WriteString("*2\r\n")
			bulk([]byte(s.key))
			fmt.Fprintf(&b, "*%d\r\n", len(s.msgs))
			for _, m := range s.msgs {
				b.WriteString("*2\r\n")
				bulk([]byte(m.ID))
				if m.fields == nil {
					b.WriteString("*-1\r\n")
					continue
				}
				fmt.Fprintf(&b, "*%d\r\n", len(m.fields))
				for _, v := range m.fields {
					bulk(v)
				}
			}
		}
		again, err := parseStreams([]byte(b.String()))
		if err != nil || fmt.Sprint(again) != fmt.Sprint(got) {
			t.Fatalf("parseStreams(%q) = %v; written out and read again: %v, %v", raw, got, again, err)
		}
	})
}
