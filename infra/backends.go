package infra

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
)

// NewRedis connects to the cluster or the one node configured, or starts the
// embedded miniredis; a cluster changes the client, never the code path.
func NewRedis(c Config, log zerolog.Logger) (redis.UniversalClient, func(), error) {
	routeRedisLogs(log)
	connect := newRedisNode
	if c.RedisCluster() {
		connect = newRedisCluster
	}
	rdb, cleanup, err := connect(c, log)
	if err == nil && c.RealRedis() {
		checkMinReplicas(c, rdb, log)
	}
	return rdb, cleanup, err
}

// checkMinReplicas warns about every master whose min-replicas-to-write is below
// SECKILL_REDIS_WAIT_REPLICAS (a Redis that hides CONFIG is not checked).
func checkMinReplicas(c Config, rdb redis.UniversalClient, log zerolog.Logger) {
	if c.RedisWaitReplicas <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	check := func(ctx context.Context, m *redis.Client) error {
		v, err := m.ConfigGet(ctx, "min-replicas-to-write").Result()
		if n, _ := strconv.Atoi(v["min-replicas-to-write"]); err == nil && n < c.RedisWaitReplicas {
			log.Warn().Str("master", m.Options().Addr).Int("min_replicas_to_write", n).Int("wait_replicas", c.RedisWaitReplicas).
				Msg("this Redis master takes writes without the replicas SECKILL_REDIS_WAIT_REPLICAS waits for: if it loses them, every claim it takes answers outcome_unknown; set min-replicas-to-write (and min-replicas-max-lag) on it, and claims are refused busy instead (docs/SCALING.md)")
		}
		return nil
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, check)
	} else if n, ok := rdb.(*redis.Client); ok {
		_ = check(ctx, n)
	}
}

func newRedisNode(c Config, log zerolog.Logger) (redis.UniversalClient, func(), error) {
	var embedded *miniredis.Miniredis
	opt, err := redis.ParseURL(c.RedisURL)
	if c.RedisURL == "" {
		embedded = miniredis.NewMiniRedis()
		if err := embedded.Start(); err != nil {
			return nil, nil, fmt.Errorf("start embedded redis: %w", err)
		}
		log.Warn().Str("addr", embedded.Addr()).
			Msg("embedded Redis (miniredis, in-process, lost at exit); set SECKILL_REDIS_URL=redis://127.0.0.1:6379/0 for a real one")
		opt = &redis.Options{Addr: embedded.Addr()}
	} else if err != nil {
		return nil, nil, fmt.Errorf("SECKILL_REDIS_URL: %w", err)
	}
	opt.PoolSize = c.RedisPoolSize
	bounded(c, &opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.ContextTimeoutEnabled, &opt.DialerRetries)
	rdb := redis.NewClient(opt)
	cleanup := func() {
		_ = rdb.Close()
		if embedded != nil {
			embedded.Close()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("redis at %s does not answer: %w", opt.Addr, err)
	}
	return rdb, cleanup, nil
}

// bounded applies Tuning.RedisTimeout to every wait of a client and makes it honour
// its callers' deadlines. A refused dial is not retried: a cluster must learn at once.
func bounded(c Config, dial, read, write, pool *time.Duration, honourCtx *bool, dialRetries *int) {
	*dial, *read, *write, *pool = c.RedisTimeout, c.RedisTimeout, c.RedisTimeout, c.RedisTimeout
	*honourCtx = true
	*dialRetries = 1
}

// ClaimRedis is the claim path's client: go-redis's automatic pipeliner, or the client itself when off.
type ClaimRedis struct{ redis.UniversalClient }

// NewClaimRedis builds the pipeliner's asynchronous face: a claim's script and index write go together.
func NewClaimRedis(rdb redis.UniversalClient, c Config, log zerolog.Logger) (ClaimRedis, func(), error) {
	if c.RedisAutoPipeline == AutoPipelineOff {
		return ClaimRedis{rdb}, func() {}, nil
	}
	if c.Tracing.Enabled() {
		// A pipelined command's span would belong to the batch, not to its request.
		log.Info().Msg("tracing is on: the claim path does not auto-pipeline, so its Redis calls are traced per request")
		return ClaimRedis{rdb}, func() {}, nil
	}
	opts := redis.DefaultAutoPipelineOptions()
	opts.FullDuplex = c.RedisAutoPipeline == AutoPipelineFull
	opts.MaxFlushDelay = c.RedisAutoPipelineDelay
	opts.NumShards = c.RedisAutoPipelineShards // full-duplex shards route by the first key: a voucher's claims stay in order
	pipelined, ok := rdb.(interface {
		AsyncAutoPipelineWithOptions(*redis.AutoPipelineOptions) (*redis.AutoPipeliner, error)
	})
	if !ok {
		return ClaimRedis{}, nil, fmt.Errorf("automatic pipelining needs a go-redis Client or ClusterClient, got %T", rdb)
	}
	ap, err := pipelined.AsyncAutoPipelineWithOptions(opts)
	if err != nil {
		return ClaimRedis{}, nil, fmt.Errorf("Tuning.RedisAutoPipeline=%s: %w", c.RedisAutoPipeline, err)
	}
	log.Info().Str("mode", c.RedisAutoPipeline).Bool("full_duplex", ap.Config().FullDuplex).
		Dur("flush_delay", opts.MaxFlushDelay).Int("shards", opts.NumShards).
		Msg("claim path on go-redis automatic pipelining")
	return ClaimRedis{ap}, func() { _ = ap.Close() }, nil
}

// newRedisCluster builds the cluster client and pings every master (a claim may land on any).
func newRedisCluster(c Config, log zerolog.Logger) (redis.UniversalClient, func(), error) {
	opt := &redis.ClusterOptions{
		Addrs:                      c.RedisClusterAddrs,
		PoolSize:                   c.RedisPoolSize,
		ClusterStateReloadInterval: clusterReloadBackstop,
	}
	bounded(c, &opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.ContextTimeoutEnabled, &opt.DialerRetries)
	rdb := redis.NewClusterClient(opt)
	followFailovers(rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.Ping(ctx).Err()
	})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("redis cluster at %v does not answer: %w", c.RedisClusterAddrs, err)
	}
	log.Info().Strs("seeds", c.RedisClusterAddrs).Msg("redis cluster client")
	return rdb, func() { _ = rdb.Close() }, nil
}

// NewDB opens MySQL/MariaDB, or embedded SQLite when SECKILL_MYSQL_DSN is empty.
func NewDB(c Config, log zerolog.Logger) (*bun.DB, func(), error) {
	open, source := mysqlstore.OpenMySQL, c.MySQLDSN
	if c.MySQLDSN == "" {
		open, source = mysqlstore.OpenSQLite, filepath.Join(c.DataDir, "seckill.db")
	}
	db, err := open(source)
	if err != nil {
		return nil, nil, fmt.Errorf("open database: %w", err)
	}
	if c.MySQLDSN == "" {
		log.Warn().Str("path", source).
			Msg("embedded SQLite; set SECKILL_MYSQL_DSN='root@tcp(127.0.0.1:3306)/seckill?parseTime=true' for MySQL/MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("database does not answer: %w", err)
	}
	return db, func() { _ = db.Close() }, nil
}
