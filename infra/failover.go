package infra

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterReloadBackstop is how old the cluster client's slot map may grow
// before a command reloads it anyway (go-redis's default is 60 s). The map is
// normally refreshed by reloadOnNodeFailure within moments of a node failing;
// this bounds a failover that no command of this instance noticed.
const clusterReloadBackstop = 5 * time.Second

// followFailovers makes the cluster client reload its slot map as soon as a
// node stops answering. go-redis reloads it on a MOVED reply or on a timer;
// a master that died never answers MOVED, so without this the client kept
// dialling the dead node until the timer (60 s by default), long after its
// replica was promoted: every sale on its slots failed for about a minute.
// With it, each failed dial, write or read on a node asks for a reload
// (go-redis coalesces them: one CLUSTER SLOTS at a time, at most one every
// 200 ms), so the promoted replica is found within moments of its promotion.
func followFailovers(cc *redis.ClusterClient) {
	h := &reloadOnNodeFailure{cc: cc}
	cc.OnNewNode(func(node *redis.Client) { node.AddHook(h) })
}

type reloadOnNodeFailure struct{ cc *redis.ClusterClient }

func (h *reloadOnNodeFailure) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		h.check(err)
		return conn, err
	}
}

func (h *reloadOnNodeFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(err)
		return err
	}
}

func (h *reloadOnNodeFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(err)
		return err
	}
}

// check asks for a reload when err says the node itself failed: a network
// error (refused, reset, timed out, cut), a command that ran out of its
// caller's deadline (the node may be stalled, or the caller simply short of
// time; a reload costs one CLUSTER SLOTS), or a reply that says the cluster is
// changing (CLUSTERDOWN, a replica's READONLY / MASTERDOWN / LOADING). A
// caller's cancellation, a nil reply and ordinary Redis errors say nothing
// about the node.
func (h *reloadOnNodeFailure) check(err error) {
	if nodeFailed(err) {
		h.cc.ReloadState(context.Background())
	}
}

func nodeFailed(err error) bool {
	var rerr redis.Error // redis.Nil is one too
	var nerr net.Error
	switch {
	case err == nil || errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &rerr):
		code, _, _ := strings.Cut(rerr.Error(), " ")
		return slices.Contains([]string{"CLUSTERDOWN", "READONLY", "MASTERDOWN", "LOADING", "TRYAGAIN"}, code)
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &nerr) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
