package infra

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestBackgroundDrainsWorkersBeforeStoppingLoops: shutdown waits for the
// draining services to finish their work while the loops still run (the
// expiry keeps expiring during a drain), then stops the loops; a service
// that fails is logged by name and stops nothing else.
func TestBackgroundDrainsWorkersBeforeStoppingLoops(t *testing.T) {
	var logs bytes.Buffer
	queueClosed := make(chan struct{})
	var cancelledWhileDraining, loopStopped atomic.Bool
	services := []Service{
		{Name: "worker", Drains: true, Run: func(ctx context.Context) error {
			select {
			case <-queueClosed:
				cancelledWhileDraining.Store(ctx.Err() != nil)
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}},
		{Name: "broken", Run: func(context.Context) error { return errors.New("boom") }},
		{Name: "loop", Run: func(ctx context.Context) error {
			<-ctx.Done()
			loopStopped.Store(true)
			return nil
		}},
	}
	bg := startServices(context.Background(), zerolog.New(&logs), services)
	close(queueClosed)
	if err := bg.drain(context.Background()); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if cancelledWhileDraining.Load() || loopStopped.Load() {
		t.Fatalf("cancelled during the drain: the worker's context %v, the loop %v", cancelledWhileDraining.Load(), loopStopped.Load())
	}
	bg.stop()
	if !loopStopped.Load() {
		t.Fatal("stop returned before the loop did")
	}
	if out := logs.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, `"service":"broken"`) ||
		!strings.Contains(out, "broken stopped") || !strings.Contains(out, "boom") {
		t.Fatalf("logged %q, want one error naming the broken service", out)
	}
}

// TestBackgroundDrainDeadlineCancelsWorkers: a worker still draining at the
// shutdown deadline is cancelled (a hard stop), waited for, and the drain
// answers the deadline; the cancellation itself is not logged as a failure.
func TestBackgroundDrainDeadlineCancelsWorkers(t *testing.T) {
	var logs bytes.Buffer
	var returned atomic.Bool
	bg := startServices(context.Background(), zerolog.New(&logs), []Service{
		{Name: "worker", Drains: true, Run: func(ctx context.Context) error {
			<-ctx.Done()
			returned.Store(true)
			return ctx.Err()
		}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := bg.drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drain past its deadline: %v, want DeadlineExceeded", err)
	}
	if !returned.Load() {
		t.Fatal("drain returned before the cancelled worker did")
	}
	bg.stop()
	if logs.Len() != 0 {
		t.Fatalf("a cancelled worker logged %q", logs.String())
	}
}

// TestServicesStartInOrder: the warm-up is off here (no cache that tracks), the
// workers come first and one per Tuning.Workers, the repair only when its
// interval is set.
func TestServicesStartInOrder(t *testing.T) {
	c := DefaultConfig()
	c.Workers = 2
	names := func(c Config) string {
		var n []string
		for _, s := range (&App{Config: c}).services() {
			n = append(n, s.Name)
		}
		return strings.Join(n, ",")
	}
	if got, want := names(c), "worker,worker,gate repair,order expiry,claim sampler"; got != want {
		t.Fatalf("services %s, want %s", got, want)
	}
	c.RestoreInterval = 0
	if got, want := names(c), "worker,worker,order expiry,claim sampler"; got != want {
		t.Fatalf("without a repair interval: services %s, want %s", got, want)
	}
}
