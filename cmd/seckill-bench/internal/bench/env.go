package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
)

// env is the backends every run shares: one Redis (real or an in-process
// miniredis) and one MySQL server (or a SQLite file per run), plus a Redis
// client of the bench's own for minting tokens and cleaning up.
type env struct {
	opts          Options
	redisURL      string
	mysqlDSN      string // the configured DSN; each run gets its own database on that server
	embeddedRedis bool
	embeddedDB    bool
	mini          *miniredis.Miniredis
	rdb           *redis.Client
	tmp           string
	// childPID is the service process of the crash scenario while it runs,
	// so its CPU is told apart from other load on the machine.
	childPID atomic.Int64
	// cores is the machine's; redisPIDs and mysqlPIDs are the local server
	// processes whose CPU a run accounts (none when they are not local).
	cores                int
	redisPIDs, mysqlPIDs []int
	// redisSelf says redisPIDs is the process Redis reported as its own,
	// so Redis's INFO cpu measures it.
	redisSelf bool
}

func openEnv(ctx context.Context, opts Options) (*env, error) {
	e := &env{opts: opts, redisURL: opts.Base.RedisURL, mysqlDSN: opts.Base.MySQLDSN}
	var err error
	if e.tmp, err = os.MkdirTemp("", "seckill-bench-"); err != nil {
		return nil, err
	}
	if e.redisURL == "" {
		// One miniredis for the whole bench, reached by URL, so the services
		// under test and the bench's own client share it like a real server.
		e.mini = miniredis.NewMiniRedis()
		if err := e.mini.Start(); err != nil {
			e.close()
			return nil, fmt.Errorf("start embedded redis: %w", err)
		}
		e.redisURL = "redis://" + e.mini.Addr() + "/0"
		e.embeddedRedis = true
	}
	e.embeddedDB = e.mysqlDSN == ""
	opt, err := redis.ParseURL(e.redisURL)
	if err != nil {
		e.close()
		return nil, fmt.Errorf("SECKILL_REDIS_URL: %w", err)
	}
	opt.PoolSize = 32
	e.rdb = redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.rdb.Ping(pctx).Err(); err != nil {
		e.close()
		return nil, fmt.Errorf("redis at %s does not answer: %w", opt.Addr, err)
	}
	e.cores = runtime.NumCPU()
	if !e.embeddedRedis {
		e.redisPIDs, e.redisSelf = redisServerPIDs(pctx, e.rdb)
	}
	if !e.embeddedDB {
		e.mysqlPIDs = pidsNamed("mariadbd", "mysqld")
	}
	return e, nil
}

func (e *env) close() {
	if e.rdb != nil {
		_ = e.rdb.Close()
	}
	if e.mini != nil {
		e.mini.Close()
	}
	if e.tmp != "" && !e.opts.KeepData {
		_ = os.RemoveAll(e.tmp)
	}
}

// runSpace is what one run owns: a Redis key prefix and a fresh database.
type runSpace struct {
	env    *env
	name   string
	prefix string
	// dsn names the run's MySQL database; empty on SQLite, where dataDir
	// holds the run's file (the path infra.NewDB opens).
	dsn     string
	dataDir string
	// ownTables: dsn is the database the operator named, shared by the
	// runs; a run drops its tables there rather than a database of its own.
	ownTables bool
	tokens    []string
}

func randomName() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (e *env) newSpace(sc Scenario, m Mode) (*runSpace, error) {
	id := randomName()
	s := &runSpace{env: e, name: id, prefix: "bench:" + id + ":"}
	if e.embeddedDB {
		s.dataDir = filepath.Join(e.tmp, string(sc)+"-"+string(m)+"-"+id)
		return s, nil
	}
	cfg, err := mysql.ParseDSN(e.mysqlDSN)
	if err != nil {
		return nil, fmt.Errorf("SECKILL_MYSQL_DSN: %w", err)
	}
	cfg.ParseTime = true
	if cfg.DBName != "" {
		// The operator named a database: the runs write there, one after
		// the other, and nowhere else. It must hold nothing at the start,
		// so that dropping every table in it afterwards drops only what a
		// run made.
		s.dsn, s.ownTables = cfg.FormatDSN(), true
		tables, err := namedTables(s.dsn)
		if err != nil {
			return nil, err
		}
		if len(tables) > 0 {
			return nil, fmt.Errorf("SECKILL_MYSQL_DSN names database %q, which holds tables (%s): the bench writes its runs there and drops them after, so it needs an empty database; name an empty one, or none and each run gets a database seckill_bench_* of its own",
				cfg.DBName, strings.Join(tables[:min(len(tables), 3)], ", "))
		}
		return s, nil
	}
	// mysqlstore.OpenMySQL creates the database on first use.
	cfg.DBName = "seckill_bench_" + strings.ReplaceAll(string(sc)+"_"+string(m), "-", "_") + "_" + id
	s.dsn = cfg.FormatDSN()
	return s, nil
}

// tablesIn lists the tables of db's database.
func tablesIn(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
	if err != nil {
		return nil, fmt.Errorf("list the tables of the bench's database: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

// namedTables lists the tables of dsn's database.
func namedTables(dsn string) ([]string, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return tablesIn(ctx, db)
}

// dropTables drops every table of dsn's database: what a run made in the
// database the operator named, which was empty before it.
func dropTables(ctx context.Context, dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	tables, err := tablesIn(ctx, db)
	if err != nil || len(tables) == 0 {
		return err
	}
	quoted := make([]string, len(tables))
	for i, t := range tables {
		quoted[i] = "`" + strings.ReplaceAll(t, "`", "``") + "`"
	}
	// One connection: the tables' foreign keys are switched off for it
	// alone, so they may be dropped in any order.
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET FOREIGN_KEY_CHECKS = 0"); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "DROP TABLE IF EXISTS "+strings.Join(quoted, ", "))
	return err
}

// openDB opens (creating and migrating) the run's database the way the
// service does.
func (s *runSpace) openDB(ctx context.Context) (*bun.DB, error) {
	var (
		db  *bun.DB
		err error
	)
	if s.dsn != "" {
		db, err = mysqlstore.OpenMySQL(s.dsn)
	} else {
		db, err = mysqlstore.OpenSQLite(filepath.Join(s.dataDir, "seckill.db"))
	}
	if err != nil {
		return nil, err
	}
	if _, err := mysqlstore.Migrate(ctx, db); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// openRun gives a run that writes MySQL itself its space, its migrated
// database and a Redis client like the service's; closeRun releases all
// three, dropping the space's data.
func (e *env) openRun(ctx context.Context, sc Scenario, m Mode) (space *runSpace, db *bun.DB, rdb *redis.Client, closeRun func() error, err error) {
	if space, err = e.newSpace(sc, m); err != nil {
		return nil, nil, nil, nil, err
	}
	if db, err = space.openDB(ctx); err != nil {
		return nil, nil, nil, nil, errors.Join(err, space.cleanup())
	}
	if rdb, err = e.serviceRedis(); err != nil {
		return nil, nil, nil, nil, errors.Join(err, db.Close(), space.cleanup())
	}
	closeRun = func() error {
		return errors.Join(rdb.Close(), db.Close(), space.cleanup())
	}
	return space, db, rdb, closeRun, nil
}

// cleanup drops the run's database and deletes its Redis keys and tokens,
// unless the data is kept for inspection.
func (s *runSpace) cleanup() error {
	if s.env.opts.KeepData {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if err := deleteKeys(ctx, s.env.rdb, s.prefix+"*"); err != nil {
		errs = append(errs, err)
	}
	if err := deleteTokens(ctx, s.env.rdb, s.tokens); err != nil {
		errs = append(errs, err)
	}
	if s.ownTables {
		if err := dropTables(ctx, s.dsn); err != nil {
			errs = append(errs, err)
		}
	} else if s.dsn != "" {
		if err := dropDatabase(ctx, s.dsn); err != nil {
			errs = append(errs, err)
		}
	}
	if s.dataDir != "" {
		_ = os.RemoveAll(s.dataDir)
	}
	return errors.Join(errs...)
}

func deleteKeys(ctx context.Context, rdb *redis.Client, match string) error {
	iter := rdb.Scan(ctx, 0, match, 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := rdb.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return flush()
}

func dropDatabase(ctx context.Context, dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	name := cfg.DBName
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+strings.ReplaceAll(name, "`", "``")+"`")
	return err
}
