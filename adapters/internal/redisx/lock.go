package redisx

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// releaseScript deletes a lock's key only while it still holds its holder's
// token, in one step: between a GET and a DEL the lock could expire and be
// taken by another, whose lock the DEL would then delete.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// Release frees the lock on key if token still holds it; a lock that expired
// and was taken by another is left to its new holder.
func Release(ctx context.Context, rdb redis.Scripter, key, token string) error {
	return releaseScript.Run(ctx, rdb, []string{key}, token).Err()
}
