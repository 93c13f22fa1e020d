package redisstream

import (
	"context"
	_ "embed"
	"slices"

	"github.com/redis/go-redis/v9"
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
// returns the commands in call order with the first error. A pipeline cannot
// fall back from EVALSHA to EVAL command by command the way Script.Run does,
// so calls the server has no cached script for are sent again with EVAL.
// Calls on different slots are fine: a cluster pipeline splits by node.
func runScripts(ctx context.Context, rdb redis.UniversalClient, s *redis.Script, calls []scriptCall) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(calls))
	if len(calls) == 0 {
		return cmds, nil
	}
	pipe := rdb.Pipeline()
	for i, c := range calls {
		cmds[i] = s.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	evalWhereNoScript(ctx, rdb, s, cmds, calls)
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

// evalWhereNoScript sends again, with EVAL and in one pipeline, the calls
// whose EVALSHA the server answered NOSCRIPT (it had not cached the script:
// just started, or SCRIPT FLUSH), and puts their new commands in cmds.
func evalWhereNoScript(ctx context.Context, rdb redis.UniversalClient, s *redis.Script, cmds []*redis.Cmd, calls []scriptCall) {
	var again []int
	for i, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return
	}
	pipe := rdb.Pipeline()
	for _, i := range again {
		cmds[i] = s.Eval(ctx, pipe, calls[i].keys, calls[i].args...)
	}
	_, _ = pipe.Exec(ctx)
}
