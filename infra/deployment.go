package infra

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
)

// DeploymentKey is the Redis key, under the key prefix, that names the
// database the prefix belongs to.
const DeploymentKey = "deployment"

// ErrForeignRedis: the Redis key prefix belongs to another database.
var ErrForeignRedis = errors.New("the Redis key prefix belongs to another deployment")

// BindDeployment ties the key prefix in Redis to the database: the database's
// deployment id (created at its first start) is written under
// <prefix>deployment when Redis has none (a new deployment, or a Redis that
// restarted empty), and must equal it otherwise. Two deployments whose
// databases differ but whose Redis and prefix are the same would take each
// other's orders (a claim answered by one, fulfilled into the other's
// database as voucher_not_found); the second of them is refused here, before
// it restores a gate or serves a claim. The database is the authority: a
// database without an id never adopts the one in Redis, since that is exactly
// the database of another deployment.
func BindDeployment(ctx context.Context, db bun.IDB, rdb redis.UniversalClient, c Config) (string, error) {
	id, err := mysqlstore.DeploymentID(ctx, db)
	if err != nil {
		return "", err
	}
	key := c.KeyPrefix + DeploymentKey
	// No expiry: the binding lasts as long as the Redis data it protects.
	if err := rdb.SetNX(ctx, key, id, 0).Err(); err != nil {
		return "", fmt.Errorf("write the deployment id to Redis (%s): %w", key, err)
	}
	got, err := rdb.Get(ctx, key).Result()
	if err != nil {
		return "", fmt.Errorf("read the deployment id from Redis (%s): %w", key, err)
	}
	if got != id {
		where := c.redisForLog() // without a password
		if c.RedisCluster() {
			where = fmt.Sprintf("cluster %v", c.RedisClusterAddrs)
		}
		return "", fmt.Errorf("%w: Redis %s under SECKILL_KEY_PREFIX=%q carries deployment %s, and this database (%s) is deployment %s. "+
			"Two deployments sharing a Redis key prefix take each other's orders. "+
			"Give this one its own SECKILL_KEY_PREFIX (or its own Redis: SECKILL_REDIS_URL / SECKILL_REDIS_CLUSTER_ADDRS), "+
			"or point SECKILL_MYSQL_DSN at the database of deployment %s. "+
			"Only if that deployment is gone for good: DEL %s in Redis, and this one takes the prefix over",
			ErrForeignRedis, where, c.KeyPrefix, got, c.dbForLog(), id, got, key)
	}
	return id, nil
}
