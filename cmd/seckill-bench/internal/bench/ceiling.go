package bench

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hmdp-go/seckill/adapters/redisgate"
	"github.com/hmdp-go/seckill/domain"
)

// ceiling is the bar the service is measured against: a bare chi handler
// doing only the claim script's one EVALSHA per request, through the same
// gate adapter the service uses. It resolves tokens from a map filled before
// the load and numbers orders with an atomic counter, so the only I/O per
// request is HTTP plus one Redis round trip.
type ceiling struct {
	gate  *redisgate.Gate
	users map[string]domain.UserID
	seq   atomic.Uint32
}

func (c *ceiling) routes() http.Handler {
	r := chi.NewRouter()
	r.Post("/voucher-order/seckill/{id}", c.claim)
	return r
}

func (c *ceiling) claim(w http.ResponseWriter, r *http.Request) {
	user, ok := c.users[r.Header.Get("Authorization")]
	if !ok {
		writeAnswer(w, http.StatusUnauthorized, answerUnauthorized)
		return
	}
	voucher, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		writeAnswer(w, http.StatusBadRequest, answerNotFound)
		return
	}
	id, err := domain.NewOrderID(time.Now(), c.seq.Add(1))
	if err != nil {
		writeAnswer(w, http.StatusInternalServerError, answerInternal)
		return
	}
	o, err := domain.NewVoucherOrder(id, user, domain.VoucherID(voucher))
	if err != nil {
		writeAnswer(w, http.StatusBadRequest, answerNotFound)
		return
	}
	err = c.gate.Reserve(r.Context(), o)
	switch {
	case err == nil:
		writeOrderID(w, id)
	case errors.Is(err, domain.ErrSoldOut):
		writeAnswer(w, http.StatusOK, answerSoldOut)
	case errors.Is(err, domain.ErrAlreadyClaimed):
		writeAnswer(w, http.StatusOK, answerDuplicate)
	case errors.Is(err, domain.ErrNotStarted):
		writeAnswer(w, http.StatusOK, answerNotStarted)
	case errors.Is(err, domain.ErrEnded):
		writeAnswer(w, http.StatusOK, answerEnded)
	case errors.Is(err, domain.ErrVoucherNotFound):
		writeAnswer(w, http.StatusOK, answerNotFound)
	default:
		writeAnswer(w, http.StatusInternalServerError, answerInternal)
	}
}

// runCeiling preheats a voucher in Redis (no database: the ceiling writes no
// orders) and drives the bare handler.
func (e *env) runCeiling(ctx context.Context, sc Scenario, r *Result) (err error) {
	space, err := e.newSpace(sc, ModeCeiling)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, space.cleanup()) }()
	rdb, err := e.serviceRedis()
	if err != nil {
		return err
	}
	defer rdb.Close()

	users, stock, maxPer := e.sale(sc)
	r.Users, r.Stock = users, stock
	v, err := saleVoucher(stock)
	if err != nil {
		return err
	}
	v = v.WithID(1)
	trips := countTrips(rdb)
	gate := redisgate.New(rdb, redisgate.Options{Prefix: space.prefix, Retention: e.opts.Base.KeyRetention})
	if err := gate.Preheat(ctx, v); err != nil {
		return err
	}
	w := newWorkload(users, maxPer, e.opts.Seed)
	if err := w.mint(ctx, e.rdb); err != nil {
		return err
	}
	space.tokens = w.tokens
	c := &ceiling{gate: gate, users: make(map[string]domain.UserID, len(w.users))}
	for i, t := range w.tokens {
		c.users[t] = w.users[i]
	}
	base, stop, err := serve(c.routes())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()

	out, err := e.drive(ctx, e.runName(r.Scenario, r.Mode, r.Round), w, base, v.ID(), trips)
	if err != nil {
		return err
	}
	r.fromLoad(out)
	e.settle(r, out)
	b, err := check(ctx, nil, v.ID(), stock, out.won)
	if err != nil {
		return err
	}
	r.Books = &b
	return nil
}

// noopHandler is the second reference: a bare net/http handler, no router,
// that answers every claim with the same constant refusal without reading
// it. Its rate is what HTTP alone costs with this load generator, the bar
// for a sale that is sold out (hot), where the service does little else.
func noopHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeAnswer(w, http.StatusOK, answerSoldOut)
	})
}

// runNoop drives the no-op handler with the scenario's workload.
func (e *env) runNoop(ctx context.Context, sc Scenario, r *Result) (err error) {
	space, err := e.newSpace(sc, ModeNoop)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, space.cleanup()) }()
	w, stock, err := e.loggedInSale(ctx, space, sc, r)
	if err != nil {
		return err
	}
	base, stop, err := serve(noopHandler())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	out, err := e.drive(ctx, e.runName(r.Scenario, r.Mode, r.Round), w, base, 1, nil)
	if err != nil {
		return err
	}
	r.fromLoad(out)
	e.settle(r, out)
	b, err := check(ctx, nil, 1, stock, out.won)
	if err != nil {
		return err
	}
	r.Books = &b
	r.note("answers every claim \"sold out\" unread: a reference, no successes by design")
	return nil
}
