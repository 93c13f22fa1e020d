package infra

import "github.com/hmdp-go/seckill/application"

// Room holds the waiting rooms' settings (issue 27).
type Room struct {
	// RoomSecret keys the HMAC that signs waiting-room tickets and passes;
	// every instance must share it. Empty: a random key kept in Redis
	// (SET NX, shared by every instance on that Redis), which a Redis that
	// loses its data replaces, voiding the tickets and passes out.
	RoomSecret string `env:"SECKILL_ROOM_SECRET"`
}

func (r Room) check(p *problems) {
	if r.RoomSecret != "" && len(r.RoomSecret) < application.MinRoomKey {
		p.add("SECKILL_ROOM_SECRET", "must be at least %d bytes (or empty: a key kept in Redis)", application.MinRoomKey)
	}
}
