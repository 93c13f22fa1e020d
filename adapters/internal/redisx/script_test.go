package redisx_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/test/testenv"
)

// commands counts the commands a client sends by name, and runs a step
// right after the nth EVALSHA is answered, before its caller sees the answer.
type commands struct {
	evalSha, loads atomic.Int32
	at             int32
	then           func()
}

func (c *commands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c *commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch args := cmd.Args(); {
		case cmd.Name() == "script" && len(args) > 1 && args[1] == "load":
			c.loads.Add(1)
		case cmd.Name() == "evalsha":
			err := next(ctx, cmd)
			if c.evalSha.Add(1) == c.at {
				c.then()
			}
			return err
		}
		return next(ctx, cmd)
	}
}

// A caller whose second EVALSHA met NOSCRIPT while another caller's load ran
// to its end loads nothing itself: the scripts are there. On a loaded
// machine, such late callers made a stampede after SCRIPT FLUSH load the
// scripts three times (redisgate TestFirstStampedeAfterScriptsAreLostCostsOneLoad).
func TestARetryAnsweredBeforeALoadFinishedLoadsNothing(t *testing.T) {
	ctx := context.Background()
	_, rdb := testenv.MiniRedis(t)
	one, two := redis.NewScript(`return 1`), redis.NewScript(`return 2`)
	set := redisx.NewSet(rdb, one, two)
	// The late caller's EVALSHAs are the 1st and the 2nd (its retry); right
	// after the 2nd is answered NOSCRIPT, another caller runs whole: it meets
	// NOSCRIPT twice, loads the set and runs.
	cmds := &commands{at: 2}
	cmds.then = func() {
		if n, err := set.Run(ctx, rdb, two, nil).Int(); err != nil || n != 2 {
			t.Errorf("the other caller's run: %d, %v", n, err)
		}
	}
	rdb.AddHook(cmds)
	if n, err := set.Run(ctx, rdb, one, nil).Int(); err != nil || n != 1 {
		t.Fatalf("the late caller's run: %d, %v", n, err)
	}
	if n := cmds.loads.Load(); n != 2 {
		t.Fatalf("%d SCRIPT LOADs, want 2: the set's two scripts, loaded once for both callers", n)
	}
}
