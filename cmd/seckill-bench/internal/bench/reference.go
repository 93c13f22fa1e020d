package bench

import (
	"bufio"
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// The fixed references: what a claim, and the whole claim job, cost at the
// least on this machine. They import nothing of the service, so they do not
// move when its code does, and each runs in a process of its own (this
// binary's hidden `reference` subcommand), so its CPU is its own.
//
//   - bare: a net/http handler (no router, no middleware) that resolves the
//     token from a map loaded at start, numbers the order with an atomic
//     counter and runs one EVALSHA of reference.lua: GET stock, SISMEMBER,
//     INCRBY, SADD, XADD.
//   - fullpipe: that handler plus, in the same process, one consumer:
//     XREADGROUP COUNT 500 BLOCK 100ms → one transaction (a multi-row
//     INSERT IGNORE into tb_voucher_order and a guarded UPDATE … SET stock =
//     stock - n WHERE stock >= n) → XACK + XTRIM MINID, pipelined.
//
// It is ../shared/reference/fullpipe, answering in the bench's format.

// referenceScript is the five-command claim script: 0 reserved and queued,
// 1 sold out, 2 already claimed.
//
//go:embed reference.lua
var referenceScript string

// ReferenceCommand is the hidden subcommand of seckill-bench that runs a
// reference; the bench runs its own binary with it.
const ReferenceCommand = "reference"

const (
	referenceGroup    = "fp"
	referenceConsumer = "c1"
	claimPath         = "/voucher-order/seckill/"
)

// ReferenceMain runs a reference until SIGTERM or SIGINT: it prints "ready
// <address>" on stdout once it serves, and on its way out a "stats" line on
// stderr (orders written, batches, failed attempts). It returns the exit code.
func ReferenceMain(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runReferenceProcess(ctx, args, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "reference:", err)
		return 1
	}
	return 0
}

type referenceServer struct {
	rdb                *redis.Client
	sha                string
	users              map[string]int64
	seq                atomic.Int64
	stockKey, orderKey string
	stream             string
	written, batches   atomic.Int64
	failures           atomic.Int64
}

func runReferenceProcess(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(ReferenceCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("mode", "bare", "bare or fullpipe")
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	redisURL := fs.String("redis", "redis://127.0.0.1:6379/0", "Redis URL")
	pool := fs.Int("pool", 100, "go-redis PoolSize of the request path")
	prefix := fs.String("prefix", "fullpipe:", "Redis key prefix")
	dsn := fs.String("dsn", "", "MySQL DSN of the order tables (fullpipe)")
	usersFile := fs.String("users", "", "file of \"<token> <user id>\" lines")
	batch := fs.Int("batch", 500, "XREADGROUP COUNT")
	block := fs.Duration("block", 100*time.Millisecond, "XREADGROUP BLOCK")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mode != string(ModeBare) && *mode != string(ModeFullpipe) {
		return fmt.Errorf("--mode %q: want bare or fullpipe", *mode)
	}
	users, err := readUsers(*usersFile)
	if err != nil {
		return err
	}
	opt, err := redis.ParseURL(*redisURL)
	if err != nil {
		return err
	}
	opt.PoolSize, opt.MinIdleConns = *pool, *pool/2
	s := &referenceServer{rdb: redis.NewClient(opt), users: users,
		stockKey: *prefix + "stock:", orderKey: *prefix + "order:", stream: *prefix + "stream"}
	defer s.rdb.Close()
	if s.sha, err = s.rdb.ScriptLoad(ctx, referenceScript).Result(); err != nil {
		return err
	}
	consumed := make(chan struct{})
	if *mode == string(ModeFullpipe) {
		cfg, err := mysql.ParseDSN(*dsn)
		if err != nil {
			return fmt.Errorf("--dsn: %w", err)
		}
		cfg.InterpolateParams = true
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return err
		}
		defer db.Close()
		db.SetMaxOpenConns(2)
		db.SetMaxIdleConns(2)
		copt := *opt
		copt.PoolSize, copt.MinIdleConns = 2, 0
		crdb := redis.NewClient(&copt)
		defer crdb.Close()
		if err := crdb.XGroupCreateMkStream(ctx, s.stream, referenceGroup, "0").Err(); err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return err
		}
		go func() {
			defer close(consumed)
			s.consume(ctx, crdb, db, *batch, *block)
		}()
	} else {
		close(consumed)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	fmt.Fprintf(stdout, "ready %s\n", l.Addr())
	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-consumed
	fmt.Fprintf(stderr, "stats written %d batches %d failures %d\n", s.written.Load(), s.batches.Load(), s.failures.Load())
	return err
}

func readUsers(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--users: %w", err)
	}
	defer f.Close()
	users := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		tok, id, ok := strings.Cut(sc.Text(), " ")
		u, err := strconv.ParseInt(id, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("--users: line %q: want \"<token> <user id>\"", sc.Text())
		}
		users[tok] = u
	}
	return users, sc.Err()
}

// ServeHTTP is the bare handler: POST /voucher-order/seckill/{id}.
func (s *referenceServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	vid, ok := strings.CutPrefix(r.URL.Path, claimPath)
	if !ok || r.Method != http.MethodPost {
		writeAnswer(w, http.StatusNotFound, answerNotFound)
		return
	}
	user, ok := s.users[r.Header.Get("Authorization")]
	if !ok {
		writeAnswer(w, http.StatusUnauthorized, answerUnauthorized)
		return
	}
	if _, err := strconv.ParseUint(vid, 10, 63); err != nil {
		writeAnswer(w, http.StatusBadRequest, answerNotFound)
		return
	}
	oid := s.seq.Add(1)
	res, err := s.rdb.EvalSha(r.Context(), s.sha, []string{s.stockKey + vid, s.orderKey + vid, s.stream}, user, vid, oid).Int()
	switch {
	case err != nil:
		writeAnswer(w, http.StatusInternalServerError, answerInternal)
	case res == 0:
		b := make([]byte, 0, 48)
		b = append(b, `{"success":true,"data":"`...)
		b = strconv.AppendInt(b, oid, 10)
		writeAnswer(w, http.StatusOK, append(b, `"}`...))
	case res == 1:
		writeAnswer(w, http.StatusOK, answerSoldOut)
	default:
		writeAnswer(w, http.StatusOK, answerDuplicate)
	}
}

// consume: first this consumer's own pending entries (id "0": delivered
// before a restart, never acked), then new ones (">"), until ctx ends.
func (s *referenceServer) consume(ctx context.Context, rdb *redis.Client, db *sql.DB, count int, block time.Duration) {
	start := "0"
	retry := func() bool {
		s.failures.Add(1)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
			return true
		}
	}
	for ctx.Err() == nil {
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: referenceGroup, Consumer: referenceConsumer, Streams: []string{s.stream, start}, Count: int64(count), Block: block,
		}).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			if !retry() {
				return
			}
			continue
		}
		var msgs []redis.XMessage
		if len(res) > 0 {
			msgs = res[0].Messages
		}
		if len(msgs) == 0 {
			start = ">"
			continue
		}
		for writeOrders(ctx, db, msgs) != nil {
			if !retry() {
				return
			}
		}
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			ids[i] = m.ID
		}
		for {
			pipe := rdb.Pipeline()
			pipe.XAck(ctx, s.stream, referenceGroup, ids...)
			pipe.XTrimMinID(ctx, s.stream, streamIDAfter(ids[len(ids)-1]))
			if _, err := pipe.Exec(ctx); err == nil {
				break
			}
			if !retry() {
				return
			}
		}
		s.written.Add(int64(len(msgs)))
		s.batches.Add(1)
	}
}

// streamIDAfter is the smallest stream id greater than id ("ms-seq" →
// "ms-(seq+1)").
func streamIDAfter(id string) string {
	ms, sq, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseUint(sq, 10, 64)
	return ms + "-" + strconv.FormatUint(n+1, 10)
}

func entryField(m redis.XMessage, k string) (int64, error) {
	s, _ := m.Values[k].(string)
	return strconv.ParseInt(s, 10, 64)
}

// writeOrders: one transaction; per voucher of the batch one multi-row
// INSERT IGNORE and one guarded stock decrement by the rows it inserted (a
// redelivered order inserts nothing and takes nothing).
func writeOrders(ctx context.Context, db *sql.DB, msgs []redis.XMessage) error {
	type group struct {
		sql strings.Builder
		n   int
	}
	now := time.Now().UTC().Format("2006-01-02 15:04:05")
	byVoucher := make(map[int64]*group, 1)
	var order []int64
	for _, m := range msgs {
		uid, err1 := entryField(m, "userId")
		vid, err2 := entryField(m, "voucherId")
		oid, err3 := entryField(m, "id")
		if err := errors.Join(err1, err2, err3); err != nil {
			return fmt.Errorf("entry %s: %w", m.ID, err)
		}
		g := byVoucher[vid]
		if g == nil {
			g = &group{}
			g.sql.Grow(64 + 48*len(msgs))
			g.sql.WriteString("INSERT IGNORE INTO tb_voucher_order (id, user_id, voucher_id, status, create_time) VALUES ")
			byVoucher[vid] = g
			order = append(order, vid)
		} else {
			g.sql.WriteByte(',')
		}
		g.sql.WriteByte('(')
		g.sql.WriteString(strconv.FormatInt(oid, 10))
		g.sql.WriteByte(',')
		g.sql.WriteString(strconv.FormatInt(uid, 10))
		g.sql.WriteByte(',')
		g.sql.WriteString(strconv.FormatInt(vid, 10))
		g.sql.WriteString(",1,'")
		g.sql.WriteString(now)
		g.sql.WriteString("')")
		g.n++
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, vid := range order {
		res, err := tx.ExecContext(ctx, byVoucher[vid].sql.String())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		res, err = tx.ExecContext(ctx, "UPDATE tb_seckill_voucher SET stock = stock - ? WHERE voucher_id = ? AND stock >= ?", n, vid, n)
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil || k != 1 {
			return fmt.Errorf("voucher %d: guarded decrement by %d matched %d rows (%v)", vid, n, k, err)
		}
	}
	return tx.Commit()
}
