package infra

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/adapters/redisroom"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/ports"
)

func provideRoomStore(rdb redis.UniversalClient, c Config) *redisroom.Rooms {
	return redisroom.New(rdb, c.KeyPrefix)
}

// provideRoomSigner keys the rooms' tickets and passes with
// SECKILL_ROOM_SECRET, or else with the key the deployment keeps in Redis.
func provideRoomSigner(rdb redis.UniversalClient, c Config, log zerolog.Logger) (*application.RoomSigner, error) {
	if c.RoomSecret != "" {
		return application.NewRoomSigner([]byte(c.RoomSecret)), nil
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("room key: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	key, err := redisroom.SharedKey(ctx, rdb, c.KeyPrefix, fresh)
	if err != nil {
		return nil, err
	}
	log.Info().Msg("waiting rooms sign with the key kept in Redis; set SECKILL_ROOM_SECRET so a Redis that loses its data does not void the tickets and passes out")
	return application.NewRoomSigner(key), nil
}

// provideClaimSeckill is the claim with all its steps: the waiting room's
// pass, the sold-out marks, the admission, and the page's counts recording
// every answer.
func provideClaimSeckill(ids ports.OrderIDs, admission ports.Admission, rooms *application.WaitingRoom,
	marks *application.SoldOutMarks, counter *metrics.ClaimCounter,
) *application.ClaimSeckill {
	return application.NewClaimSeckill(ids, admission).WithRooms(rooms).WithSoldOutMarks(marks).WithRecorder(counter)
}
