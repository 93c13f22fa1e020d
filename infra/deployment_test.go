package infra_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

// deploymentBackend is a Redis and a way to make fresh migrated databases.
type deploymentBackend struct {
	name  string
	redis func(t *testing.T) redis.UniversalClient
	newDB func(t *testing.T) *bun.DB
}

func deploymentBackends() []deploymentBackend {
	sqlite := func(t *testing.T) *bun.DB {
		db, err := mysqlstore.OpenSQLite(testenv.SQLitePath(t))
		return migratedDB(t, db, err)
	}
	mysql := func(t *testing.T) *bun.DB {
		db, err := mysqlstore.OpenMySQL(testenv.MySQLDSN(t))
		return migratedDB(t, db, err)
	}
	return []deploymentBackend{
		{name: "miniredis_sqlite", redis: func(t *testing.T) redis.UniversalClient {
			_, c := testenv.MiniRedis(t)
			return c
		}, newDB: sqlite},
		{name: "redis_mysql", redis: func(t *testing.T) redis.UniversalClient { return testenv.RealRedis(t) }, newDB: mysql},
		{name: "redis_cluster_mysql", redis: func(t *testing.T) redis.UniversalClient { return testenv.RedisCluster(t) }, newDB: mysql},
	}
}

func migratedDB(t *testing.T, db *bun.DB, err error) *bun.DB {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := mysqlstore.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

// Two deployments (staging and production) on one Redis and key prefix but
// different databases took each other's orders silently. The key prefix is
// now bound to the database that first used it.
func TestDeploymentBindsTheKeyPrefixToItsDatabase(t *testing.T) {
	for _, b := range deploymentBackends() {
		t.Run(b.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rdb := b.redis(t)
			c := infra.DefaultConfig()
			c.KeyPrefix = testenv.KeyPrefix(t)
			t.Cleanup(func() { testenv.DropPrefix(t, rdb, c.KeyPrefix) })
			production, staging := b.newDB(t), b.newDB(t)

			first, err := infra.BindDeployment(ctx, production, rdb, c)
			if err != nil || first == "" {
				t.Fatalf("first deployment: %q, %v", first, err)
			}
			// The same database again (a restart, a second instance): bound.
			if again, err := infra.BindDeployment(ctx, production, rdb, c); err != nil || again != first {
				t.Fatalf("same database: %q, %v; want %q", again, err, first)
			}

			// Another database on the same prefix: refused, saying what to change.
			_, err = infra.BindDeployment(ctx, staging, rdb, c)
			if !errors.Is(err, infra.ErrForeignRedis) {
				t.Fatalf("second database on the prefix: %v, want ErrForeignRedis", err)
			}
			for _, want := range []string{"SECKILL_KEY_PREFIX", "SECKILL_MYSQL_DSN", first} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message lacks %q: %v", want, err)
				}
			}
			// ...and again: the refused one did not take the prefix over.
			if _, err := infra.BindDeployment(ctx, staging, rdb, c); !errors.Is(err, infra.ErrForeignRedis) {
				t.Fatalf("second try of the second database: %v", err)
			}
			// Its own prefix: fine.
			own := c
			own.KeyPrefix = testenv.KeyPrefix(t)
			t.Cleanup(func() { testenv.DropPrefix(t, rdb, own.KeyPrefix) })
			if id, err := infra.BindDeployment(ctx, staging, rdb, own); err != nil || id == first {
				t.Fatalf("second database on its own prefix: %q, %v", id, err)
			}

			// Redis restarted empty: production starts and writes its id back,
			// and the staging database is still refused after it.
			if err := rdb.Del(ctx, c.KeyPrefix+infra.DeploymentKey).Err(); err != nil {
				t.Fatal(err)
			}
			if id, err := infra.BindDeployment(ctx, production, rdb, c); err != nil || id != first {
				t.Fatalf("after Redis lost the key: %q, %v; want %q", id, err, first)
			}
			if got, _ := rdb.Get(ctx, c.KeyPrefix+infra.DeploymentKey).Result(); got != first {
				t.Fatalf("Redis holds %q, want %q written back", got, first)
			}
			if _, err := infra.BindDeployment(ctx, staging, rdb, c); !errors.Is(err, infra.ErrForeignRedis) {
				t.Fatalf("second database after the re-bind: %v", err)
			}
		})
	}
}

// The service refuses to start (before restoring any gate into Redis) when
// its prefix carries another deployment's id.
func TestStartRefusesAnotherDeploymentsRedis(t *testing.T) {
	c := infra.DefaultConfig()
	c.Queue = infra.QueueChannel
	c.HTTPAddr, c.MetricsAddr, c.DataDir = "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
	app, cleanup, err := infra.Build(c, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	ctx := context.Background()
	if err := app.Redis.Set(ctx, c.KeyPrefix+infra.DeploymentKey, "someone-else", 0).Err(); err != nil {
		t.Fatal(err)
	}
	err = app.Start(ctx)
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = app.Shutdown(sctx)
		t.Fatal("started on another deployment's Redis prefix")
	}
	if !errors.Is(err, infra.ErrForeignRedis) {
		t.Fatalf("start: %v, want ErrForeignRedis", err)
	}
}
