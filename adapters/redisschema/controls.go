package redisschema

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed setend.lua
var setEndLua string

// SetEndScript moves a voucher's (or a bucket's) end in its hash, for the
// sale controls; both gates run it, each in its own script set.
var SetEndScript = redis.NewScript(setEndLua)
