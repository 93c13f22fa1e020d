package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
)

// syncShop is the original's flow before any optimisation, as a bench-only
// HTTP handler over the same tables, so the table shows where the seeds
// started from. Per request, as the original does:
//
//   - RefreshTokenInterceptor: HGETALL login:token:<token>, then EXPIRE it;
//   - getById: SELECT the seckill voucher, then check its window and stock
//     in memory (on that snapshot);
//   - the per-user lock, Redisson's lock:order:<userId>, as SET NX PX with a
//     random owner and an owner-checked release;
//   - createVoucherOrder, @Transactional: COUNT the user's orders, the
//     guarded decrement stock = stock - 1 WHERE stock > 0, the order id from
//     the Redis counter (INCR), INSERT, COMMIT.
//
// That is 5 Redis round trips and 6 MySQL statements for a success, and 2
// Redis plus 1 MySQL for every sold-out answer.
type syncShop struct {
	db     *bun.DB
	rdb    redis.UniversalClient
	prefix string
}

// lockLease is Redisson's default lease (its watchdog's 30s).
const lockLease = 30 * time.Second

// unlockScript deletes the lock only if this request still owns it, as
// Redisson's unlock and the course's SimpleRedisLock do.
var unlockScript = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0`)

var (
	errSyncDuplicate = errors.New("duplicate")
	errSyncSoldOut   = errors.New("sold out")
	// errSyncLockHeld: tryLock failed; the original answers a claim "no
	// duplicate orders" and its consumer drops the order with a log line.
	errSyncLockHeld = errors.New("lock held: order dropped")
)

// The answers, pre-encoded like the service's refusals.
var (
	answerSoldOut      = []byte(`{"success":false,"errorMsg":"库存不足","code":"sold_out"}`)
	answerDuplicate    = []byte(`{"success":false,"errorMsg":"不能重复下单","code":"duplicate"}`)
	answerNotStarted   = []byte(`{"success":false,"errorMsg":"秒杀尚未开始","code":"not_started"}`)
	answerEnded        = []byte(`{"success":false,"errorMsg":"秒杀已经结束","code":"ended"}`)
	answerNotFound     = []byte(`{"success":false,"errorMsg":"优惠券不存在","code":"not_found"}`)
	answerUnauthorized = []byte(`{"success":false,"errorMsg":"未登录","code":"unauthorized"}`)
	answerInternal     = []byte(`{"success":false,"errorMsg":"internal error","code":"internal"}`)
)

func writeAnswer(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeOrderID(w http.ResponseWriter, id domain.OrderID) {
	b := make([]byte, 0, 48)
	b = append(b, `{"success":true,"data":"`...)
	b = strconv.AppendInt(b, int64(id), 10)
	b = append(b, `"}`...)
	writeAnswer(w, http.StatusOK, b)
}

func (s *syncShop) routes() http.Handler {
	r := chi.NewRouter()
	r.Post("/voucher-order/seckill/{id}", s.claim)
	return r
}

func (s *syncShop) claim(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	key := redissession.DefaultPrefix + r.Header.Get("Authorization")
	session, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		writeAnswer(w, http.StatusInternalServerError, answerInternal)
		return
	}
	user, err := strconv.ParseInt(session["id"], 10, 64)
	if err != nil || user <= 0 {
		writeAnswer(w, http.StatusUnauthorized, answerUnauthorized)
		return
	}
	if err := s.rdb.Expire(ctx, key, tokenTTL).Err(); err != nil {
		writeAnswer(w, http.StatusInternalServerError, answerInternal)
		return
	}
	voucher, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		writeAnswer(w, http.StatusBadRequest, answerNotFound)
		return
	}

	var sv struct {
		Stock     int       `bun:"stock"`
		BeginTime time.Time `bun:"begin_time"`
		EndTime   time.Time `bun:"end_time"`
	}
	err = s.db.NewSelect().Table("tb_seckill_voucher").Column("stock", "begin_time", "end_time").
		Where("voucher_id = ?", voucher).Scan(ctx, &sv)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		writeAnswer(w, http.StatusOK, answerNotFound)
		return
	case err != nil:
		writeAnswer(w, http.StatusInternalServerError, answerInternal)
		return
	}
	now := time.Now()
	switch {
	case sv.BeginTime.After(now):
		writeAnswer(w, http.StatusOK, answerNotStarted)
		return
	case sv.EndTime.Before(now):
		writeAnswer(w, http.StatusOK, answerEnded)
		return
	case sv.Stock < 1:
		writeAnswer(w, http.StatusOK, answerSoldOut)
		return
	}

	var id domain.OrderID
	err = s.withUserLock(ctx, user, func() error {
		var err error
		id, err = s.createVoucherOrder(ctx, user, voucher, func(ctx context.Context) (domain.OrderID, error) {
			seq, err := s.rdb.Incr(ctx, s.prefix+"icr:order:"+now.UTC().Format("2006:01:02")).Result()
			if err != nil {
				return 0, err
			}
			return domain.NewOrderID(now, uint32(seq))
		})
		return err
	})
	switch {
	case errors.Is(err, errSyncLockHeld):
		// The original answers "不允许重复下单" when tryLock fails.
		writeAnswer(w, http.StatusOK, answerDuplicate)
	case errors.Is(err, errSyncDuplicate):
		writeAnswer(w, http.StatusOK, answerDuplicate)
	case errors.Is(err, errSyncSoldOut):
		writeAnswer(w, http.StatusOK, answerSoldOut)
	case err != nil:
		writeAnswer(w, http.StatusInternalServerError, answerInternal)
	default:
		writeOrderID(w, id)
	}
}

// consume is one order of the original's consumer (handleVoucherOrder): the
// same lock and transaction as a synchronous claim, with the id the claim
// already issued.
func (s *syncShop) consume(ctx context.Context, o domain.VoucherOrder) error {
	return s.withUserLock(ctx, int64(o.UserID()), func() error {
		_, err := s.createVoucherOrder(ctx, int64(o.UserID()), int64(o.VoucherID()), func(context.Context) (domain.OrderID, error) {
			return o.ID(), nil
		})
		return err
	})
}

// withUserLock runs fn under Redisson's lock:order:<userId>, taken with
// tryLock semantics (SET NX PX with a random owner, no wait) and released
// only by its owner. A lock another request holds is errSyncLockHeld.
func (s *syncShop) withUserLock(ctx context.Context, user int64, fn func() error) error {
	lock := s.prefix + "lock:order:" + strconv.FormatInt(user, 10)
	owner := randomOwner()
	got, err := s.rdb.SetNX(ctx, lock, owner, lockLease).Result()
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if !got {
		return errSyncLockHeld
	}
	defer func() { _ = unlockScript.Run(context.WithoutCancel(ctx), s.rdb, []string{lock}, owner).Err() }()
	return fn()
}

// createVoucherOrder is the original's createVoucherOrder, @Transactional:
// COUNT the user's orders, the guarded decrement stock = stock - 1 WHERE
// stock > 0, then the INSERT, in one transaction. newID gives the order id
// inside it: the synchronous flow INCRs Redis's counter there, as the
// original's RedisIdWorker does; the consumer passes the claim's id.
func (s *syncShop) createVoucherOrder(ctx context.Context, user, voucher int64, newID func(context.Context) (domain.OrderID, error)) (domain.OrderID, error) {
	var id domain.OrderID
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		n, err := tx.NewSelect().Table("tb_voucher_order").
			Where("user_id = ?", user).Where("voucher_id = ?", voucher).Count(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			return errSyncDuplicate
		}
		res, err := tx.ExecContext(ctx, "UPDATE tb_seckill_voucher SET stock = stock - 1 WHERE voucher_id = ? AND stock > 0", voucher)
		if err != nil {
			return err
		}
		if changed, err := res.RowsAffected(); err != nil || changed == 0 {
			return errors.Join(errSyncSoldOut, err)
		}
		if id, err = newID(ctx); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO tb_voucher_order (id, user_id, voucher_id) VALUES (?, ?, ?)", int64(id), user, voucher)
		return err
	})
	return id, err
}

func randomOwner() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// runSync runs the sync flow on a fresh database.
func (e *env) runSync(ctx context.Context, sc Scenario, r *Result) (err error) {
	space, db, rdb, closeRun, err := e.openRun(ctx, sc, ModeSync)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeRun()) }()

	users, stock, maxPer := e.sale(sc)
	r.Users, r.Stock = users, stock
	v, err := saleVoucher(stock)
	if err != nil {
		return err
	}
	saved, err := mysqlstore.NewVoucherRepo(db).AddSeckill(ctx, v)
	if err != nil {
		return fmt.Errorf("create voucher: %w", err)
	}
	trips := countTrips(rdb)
	shop := &syncShop{db: db, rdb: rdb, prefix: space.prefix}
	base, stop, err := serve(shop.routes())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()

	w := newWorkload(users, maxPer, e.opts.Seed)
	if err := w.mint(ctx, e.rdb); err != nil {
		return err
	}
	space.tokens = w.tokens
	out, err := e.drive(ctx, e.runName(r.Scenario, r.Mode, r.Round), w, base, saved.ID(), trips)
	if err != nil {
		return err
	}
	r.fromLoad(out)
	// Orders are written inside the requests: the drain ends with the load.
	lastAt, drained, err := waitSettled(ctx, db, saved.ID(), out.successes, e.opts.DrainTimeout)
	if err != nil {
		return err
	}
	e.settle(r, out)
	b, err := check(ctx, db, saved.ID(), stock, out.won)
	if err != nil {
		return err
	}
	r.Books = &b
	r.setDrain(out, lastAt, b.Created, drained)
	r.noteUndrained()
	return nil
}

// saleVoucher is a seckill voucher on sale from a minute ago for an hour.
func saleVoucher(stock int) (domain.Voucher, error) {
	now := time.Now().UTC()
	sale, err := domain.NewSale(stock, now.Add(-time.Minute), now.Add(time.Hour))
	if err != nil {
		return domain.Voucher{}, err
	}
	return domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "bench", PayValue: 100, ActualValue: 1000}, sale)
}

// serviceRedis is a Redis client configured like the service's.
func (e *env) serviceRedis() (*redis.Client, error) {
	opt, err := redis.ParseURL(e.redisURL)
	if err != nil {
		return nil, err
	}
	opt.PoolSize = e.opts.Base.RedisPoolSize
	return redis.NewClient(opt), nil
}

// serve runs h on a free loopback port with the service's server timeouts.
func serve(h http.Handler) (base string, stop func() error, err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	return "http://" + l.Addr().String(), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}, nil
}
