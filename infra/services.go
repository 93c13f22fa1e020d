package infra

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/hmdp-go/seckill/application"
)

// Service is background work the App runs from its start to its shutdown.
// Run returns when ctx ends, or when a draining service's work is done.
type Service struct {
	Name string
	Run  func(ctx context.Context) error
	// Drains marks the workers: shutdown waits (to its deadline) for them to empty the closed queue.
	Drains bool
}

func (a *App) services() []Service {
	var s []Service
	if a.Sessions.Tracking() && a.Config.TokenWarm {
		s = append(s, Service{Name: "session warm-up", Run: a.warmSessions})
	}
	for range a.Config.Workers {
		s = append(s, Service{Name: "worker", Run: a.Worker.Run, Drains: true})
	}
	if a.Config.RestoreInterval > 0 {
		s = append(s, Service{Name: "gate repair", Run: ticking(a.Config.RestoreInterval, a.repairPass)})
	}
	s = append(s,
		Service{Name: "order expiry", Run: ticking(expiryEvery, a.expiryPass)},
		Service{Name: "claim sampler", Run: func(ctx context.Context) error { a.Claims.Run(ctx); return nil }},
	)
	return s
}

// ticking runs pass every interval until ctx ends; a pass logs its own errors.
func ticking(every time.Duration, pass func(context.Context)) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				pass(ctx)
			}
		}
	}
}

// background runs the draining Services and the rest under an errgroup each.
type background struct {
	cancel context.CancelFunc
	drains errgroup.Group
	loops  errgroup.Group
}

// startServices starts every service on a context that outlives ctx, ended by drain's deadline or stop.
func startServices(ctx context.Context, log zerolog.Logger, services []Service) *background {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b := &background{cancel: cancel}
	for _, s := range services {
		g := &b.loops
		if s.Drains {
			g = &b.drains
		}
		g.Go(func() error {
			if err := s.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error().Err(err).Str("service", s.Name).Msg(s.Name + " stopped")
			}
			return nil
		})
	}
	return b
}

// drain waits for the draining services; at ctx's end it cancels every
// service, waits for the draining ones, and answers ctx's error.
func (b *background) drain(ctx context.Context) error {
	stop := context.AfterFunc(ctx, b.cancel)
	_ = b.drains.Wait()
	if stop() { // ctx had not ended: the drain finished first
		return nil
	}
	return ctx.Err()
}

func (b *background) stop() {
	b.cancel()
	_ = b.drains.Wait()
	_ = b.loops.Wait()
}

// warmSessions reads the sessions already in Redis into the cache; the cache's Close stops it.
func (a *App) warmSessions(ctx context.Context) error {
	began := time.Now()
	a.Sessions.Warm()
	select {
	case <-ctx.Done():
	case <-a.Sessions.WarmedUp():
		p := a.Sessions.WarmProgress()
		a.Log.Info().Int64("sessions", p.Cached).Int64("read", p.Read).Int64("scans", p.Scans).
			Dur("took", time.Since(began)).Msg("session cache warmed")
	}
	return nil
}

// expiryPass expires due orders and finishes interrupted returns, again at
// once after a full batch. It runs with a window of 0 too: cancelled orders' units return.
func (a *App) expiryPass(ctx context.Context) {
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 10*expiryEvery)
		res, err := a.Expire.Handle(pctx)
		cancel()
		if res.Expired > 0 || res.Returned > 0 {
			a.Log.Info().Int("expired", res.Expired).Int("returned", res.Returned).Msg("unpaid orders expired; units back on sale")
		}
		if err != nil {
			if ctx.Err() == nil {
				a.Log.Error().Err(err).Msg("order expiry pass failed; retrying at the next interval")
			}
			return
		}
		if !a.Expire.Full(res) {
			return
		}
	}
}

// repairPass restores the gate of any live voucher that Redis lost, so the instance heals without a restart.
func (a *App) repairPass(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, a.Config.RestoreInterval)
	defer cancel()
	// A Redis that lost its data lost the binding too: write it back first.
	if _, err := BindDeployment(rctx, a.DB, a.Redis, a.Config); err != nil && ctx.Err() == nil {
		a.Log.Error().Err(err).Msg("deployment binding check failed; retrying at the next interval")
		if errors.Is(err, ErrForeignRedis) {
			return // no repair from this database into another's prefix
		}
	}
	rep, err := a.Restore.Repair(rctx)
	logHealed(a.Log, rep.Healed)
	// Transfers of split vouchers whose claimant died between two steps.
	if moved, terr := a.Gate.RepairAll(rctx); terr != nil && ctx.Err() == nil {
		a.Log.Error().Err(terr).Int("finished", moved).Msg("finishing bucket transfers failed; retrying at the next interval")
	} else if moved > 0 {
		a.Log.Warn().Int("transfers", moved).Msg("finished bucket transfers left by a claim that stopped between two steps")
	}
	switch {
	case err != nil && ctx.Err() == nil:
		a.Log.Error().Err(err).Int("repaired", rep.Restored).Msg("gate repair failed; retrying at the next interval")
	case rep.Restored > 0:
		a.Log.Warn().Int("vouchers", rep.Restored).Msg("gate repaired from the database: Redis had lost their state")
	}
}

// logHealed tells, per voucher, what a gate that had lost committed orders got back.
func logHealed(log zerolog.Logger, healed []application.HealedVoucher) {
	for _, h := range healed {
		log.Warn().Int64("voucher", int64(h.Voucher)).Int("buyers_restored", h.Restored).
			Int("units_retaken", h.Retaken).Int("oversold", h.Oversold).
			Msg("gate healed from the database: Redis had forgotten committed orders (oversold: units it had sold again, which the database refuses)")
	}
}
