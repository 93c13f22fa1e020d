package redisstream

import (
	"context"
	_ "embed"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
)

var (
	//go:embed ack.lua
	ackLua    string
	ackScript = redis.NewScript(ackLua)

	//go:embed renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)

	//go:embed gc.lua
	gcLua    string
	gcScript = redis.NewScript(gcLua)
)

// scriptChunk bounds the entry IDs one script call carries, so no call holds
// Redis for long or strains Lua's stack.
const scriptChunk = 500

// scriptCall is one run of a script: its KEYS and ARGV.
type scriptCall struct {
	keys []string
	args []any
}

// streamIDs is at most scriptChunk entry IDs of one stream, ascending.
type streamIDs struct {
	key string
	ids []string
}

// perStream groups entries by stream, in chunks of at most scriptChunk IDs,
// each in ascending order (ack.lua needs the smallest and largest; they
// mostly come sorted already).
func perStream(refs []entryRef) []streamIDs {
	byStream := map[string][]string{}
	for _, r := range refs {
		byStream[r.stream] = append(byStream[r.stream], r.id)
	}
	var out []streamIDs
	for key, ids := range byStream {
		if !slices.IsSortedFunc(ids, cmpID) {
			slices.SortFunc(ids, cmpID)
		}
		for len(ids) > 0 {
			n := min(len(ids), scriptChunk)
			out = append(out, streamIDs{key: key, ids: ids[:n:n]})
			ids = ids[n:]
		}
	}
	return out
}

// perStreamCalls makes the calls of a script over entries of one stream each
// (renew.lua): KEYS[1] the stream, ARGV the lead arguments and then at most
// scriptChunk entry IDs, in ascending order.
func perStreamCalls(refs []entryRef, lead ...any) []scriptCall {
	chunks := perStream(refs)
	calls := make([]scriptCall, len(chunks))
	for i, c := range chunks {
		args := make([]any, 0, len(lead)+len(c.ids))
		args = append(args, lead...)
		for _, id := range c.ids {
			args = append(args, id)
		}
		calls[i] = scriptCall{keys: []string{c.key}, args: args}
	}
	return calls
}

// runScripts runs one script for each call in one pipelined round trip, and
// returns the commands in call order with the first error. Calls on
// different slots are fine: a cluster pipeline splits by node.
func (q *Queue) runScripts(ctx context.Context, s *redis.Script, calls []scriptCall) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(calls))
	if len(calls) == 0 {
		return cmds, nil
	}
	pipe := q.rdb.Pipeline()
	for i, c := range calls {
		cmds[i] = s.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	q.retryNoScript(ctx, s, cmds, calls)
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

// retryNoScript runs again the calls whose pipelined EVALSHA the server
// answered NOSCRIPT (just started, a failover, SCRIPT FLUSH), the way every
// Redis adapter answers it (redisx.Set.Retry: the scripts are loaded once,
// not sent whole with each call), and puts their new commands in cmds.
func (q *Queue) retryNoScript(ctx context.Context, s *redis.Script, cmds []*redis.Cmd, calls []scriptCall) {
	for i, c := range cmds {
		if redisx.IsNoScript(c.Err()) {
			cmds[i] = q.scripts.Retry(ctx, q.rdb, s, calls[i].keys, calls[i].args...)
		}
	}
}
