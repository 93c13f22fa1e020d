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

// clusterReloadBackstop bounds the slot map's age for a failover no command of this instance noticed.
const clusterReloadBackstop = 5 * time.Second

// followFailovers makes the cluster client reload its slot map as soon as a node
// fails: a dead master never answers MOVED. go-redis coalesces the reloads.
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

func (h *reloadOnNodeFailure) check(err error) {
	if nodeFailed(err) {
		h.cc.ReloadState(context.Background())
	}
}

// nodeFailed: a network error, a missed deadline, or a reply that says the cluster
// is changing. A cancellation or an ordinary Redis error says nothing of the node.
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
