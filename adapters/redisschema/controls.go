package redisschema

import (
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/domain"
)

//go:embed controls.lua
var controlsLua string

// ControlsScript carries a sale's controls (end, pause, units added) to a
// voucher's or a bucket's hash; both gates run it, each in its own script
// set.
var ControlsScript = redis.NewScript(controlsLua)

// Paused is how a hash keeps a sale's pause ('paused' field).
func Paused(s domain.Sale) string {
	if s.Paused() {
		return "1"
	}
	return "0"
}
