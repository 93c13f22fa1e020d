// Package redisroom keeps the sales' waiting rooms in Redis: per room a hash, the
// users' join indexes, the boundary's steps and the used passes, all in the
// voucher's hash tag, so each operation is one script on one slot.
package redisroom

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

var (
	//go:embed open.lua
	openLua string
	//go:embed draw.lua
	drawLua string
	//go:embed join.lua
	joinLua string
	//go:embed advance.lua
	advanceLua string
	//go:embed use.lua
	useLua string

	openScript    = redis.NewScript(openLua)
	joinScript    = redis.NewScript(drawLua + joinLua)
	advanceScript = redis.NewScript(drawLua + advanceLua)
	useScript     = redis.NewScript(useLua)

	scripts = []*redis.Script{openScript, joinScript, advanceScript, useScript}
)

// retention is how long a room's keys outlive its sale.
const retention = 24 * time.Hour

// Rooms is the RoomStore over Redis.
type Rooms struct {
	rdb     redis.UniversalClient
	scripts *redisx.Set
	prefix  string
}

var _ ports.RoomStore = (*Rooms)(nil)

// New panics on a nil client or a prefix with a hash-tag brace; "" is redisschema.DefaultPrefix.
func New(rdb redis.UniversalClient, prefix string) *Rooms {
	if rdb == nil {
		panic("redisroom: New needs a non-nil Redis client")
	}
	prefix = cmp.Or(prefix, redisschema.DefaultPrefix)
	if err := redisschema.ValidatePrefix(prefix); err != nil {
		panic("redisroom: " + err.Error())
	}
	return &Rooms{rdb: rdb, prefix: prefix, scripts: redisx.NewSet(rdb, scripts...)}
}

// LoadScripts loads the rooms' scripts on every node of rdb, so a sale's first calls miss no script.
func LoadScripts(ctx context.Context, rdb redis.UniversalClient) error {
	if err := redisx.NewSet(rdb, scripts...).Load(ctx); err != nil {
		return fmt.Errorf("rooms: %w", err)
	}
	return nil
}

type roomKeys struct{ room, users, steps, used, usedBy string }

func (s *Rooms) keys(id domain.VoucherID) roomKeys {
	k := redisschema.KeysFor(s.prefix, id)
	return roomKeys{room: k.Room(""), users: k.Room(":users"), steps: k.Room(":steps"), used: k.Room(":used"), usedBy: k.Room(":usedby")}
}

func (s *Rooms) Open(ctx context.Context, v domain.Voucher) error {
	sale := v.Sale()
	if !sale.HasRoom() {
		return nil
	}
	if v.ID() <= 0 {
		return errors.New("open room: voucher has no id yet")
	}
	cfg := ports.NewRoomConfig(sale)
	r := cfg.Rules
	err := s.scripts.Run(ctx, s.rdb, openScript, []string{s.keys(v.ID()).room},
		r.OpensBefore().Milliseconds(), r.AdmitPerSecond(), r.PassTTL().Milliseconds(),
		cfg.Cap, cfg.Begin.UnixMilli(), cfg.End.UnixMilli(), cfg.End.Add(retention).UnixMilli(), r.Margin()).Err()
	if err != nil {
		return fmt.Errorf("open room of voucher %d: %w", v.ID(), err)
	}
	return nil
}

// Config reads the room's hash and whether the gate holds the sale, in one round trip.
func (s *Rooms) Config(ctx context.Context, id domain.VoucherID) (ports.RoomConfig, ports.RoomLookup, error) {
	pipe := s.rdb.Pipeline()
	get := pipe.HMGet(ctx, s.keys(id).room, "opens", "rate", "ttl", "cap", "begin", "end", "margin")
	gate := pipe.Exists(ctx, redisschema.KeysFor(s.prefix, id).Voucher)
	_, err := pipe.Exec(ctx)
	if err != nil {
		return ports.RoomConfig{}, ports.RoomUnknown, fmt.Errorf("read room of voucher %d: %w", id, err)
	}
	var n [7]int64
	for i, v := range get.Val() {
		str, ok := v.(string)
		if !ok {
			if gate.Val() > 0 {
				return ports.RoomConfig{}, ports.RoomAbsent, nil
			}
			return ports.RoomConfig{}, ports.RoomUnknown, nil
		}
		if n[i], err = strconv.ParseInt(str, 10, 64); err != nil {
			return ports.RoomConfig{}, ports.RoomUnknown, fmt.Errorf("room of voucher %d: field %d: %w", id, i, err)
		}
	}
	return ports.RoomConfig{
		Rules: domain.UnmarshalRoomRulesFromDatabase(time.Duration(n[0])*time.Millisecond, int(n[1]), time.Duration(n[2])*time.Millisecond, int(n[6])),
		Begin: time.UnixMilli(n[4]).UTC(), End: time.UnixMilli(n[5]).UTC(), Cap: n[3],
	}, ports.RoomPresent, nil
}

func (s *Rooms) Join(ctx context.Context, id domain.VoucherID, user domain.UserID, now time.Time, seed [domain.RoomSeedSize]byte) (int64, bool, error) {
	k := s.keys(id)
	r, err := s.scripts.Run(ctx, s.rdb, joinScript, []string{k.room, k.users},
		int64(user), now.UnixMilli(), seed[:], retention.Milliseconds()).Int64Slice()
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("join room of voucher %d: %w", id, err)
	case len(r) != 2:
		return 0, false, fmt.Errorf("join room of voucher %d: unexpected answer %v", id, r)
	case r[0] < 0:
		return 0, false, domain.ErrNoRoom
	}
	return r[0], r[1] == 1, nil
}

func (s *Rooms) Advance(ctx context.Context, id domain.VoucherID, now time.Time, seed [domain.RoomSeedSize]byte, after int64) (ports.RoomState, error) {
	k := s.keys(id)
	res, err := s.scripts.Run(ctx, s.rdb, advanceScript, []string{k.room, k.steps, k.used, redisschema.KeysFor(s.prefix, id).Voucher},
		now.UnixMilli(), seed[:], after, retention.Milliseconds()).Result()
	if err != nil {
		return ports.RoomState{}, fmt.Errorf("advance room of voucher %d: %w", id, err)
	}
	if n, ok := res.(int64); ok && n < 0 {
		return ports.RoomState{}, domain.ErrNoRoom
	}
	return parseState(res)
}

func parseState(res any) (ports.RoomState, error) {
	vals, ok := res.([]any)
	if !ok || len(vals) < 10 {
		return ports.RoomState{}, fmt.Errorf("advance: unexpected answer %v", res)
	}
	num := func(i int) int64 { n, _ := vals[i].(int64); return n }
	st := ports.RoomState{Joined: num(0), Drawn: num(1) == 1, N: num(2), Boundary: num(4), Expired: num(5), Used: num(6), Lapsed: num(7),
		Outstanding: num(8), Left: num(9)}
	if seed, _ := vals[3].(string); st.Drawn {
		if len(seed) != domain.RoomSeedSize {
			return ports.RoomState{}, fmt.Errorf("advance: the draw's seed has %d bytes", len(seed))
		}
		copy(st.Seed[:], seed)
	}
	for _, v := range vals[10:] {
		m, _ := v.(string)
		b, at, ok := strings.Cut(m, ":")
		bn, err1 := strconv.ParseInt(b, 10, 64)
		ms, err2 := strconv.ParseInt(at, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return ports.RoomState{}, fmt.Errorf("advance: bad step %q", m)
		}
		st.Steps = append(st.Steps, ports.RoomStep{Boundary: bn, At: time.UnixMilli(ms).UTC()})
	}
	return st, nil
}

func (s *Rooms) Use(ctx context.Context, id domain.VoucherID, user domain.UserID, position int64) error {
	k := s.keys(id)
	err := s.scripts.Run(ctx, s.rdb, useScript, []string{k.room, k.usedBy, k.used},
		int64(user), position, retention.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("use pass of voucher %d: %w", id, err)
	}
	return nil
}

func (s *Rooms) Used(ctx context.Context, id domain.VoucherID, user domain.UserID) (bool, error) {
	used, err := s.rdb.SIsMember(ctx, s.keys(id).usedBy, int64(user)).Result()
	if err != nil {
		return false, fmt.Errorf("read whether a pass of voucher %d was used: %w", id, err)
	}
	return used, nil
}

// SharedKey is the deployment's room signing key in Redis, set once by the first
// instance (SET NX) and read by every other, so instances without SECKILL_ROOM_SECRET sign alike.
func SharedKey(ctx context.Context, rdb redis.UniversalClient, prefix string, fresh []byte) ([]byte, error) {
	key := prefix + "room-key"
	if err := rdb.SetNX(ctx, key, fresh, 0).Err(); err != nil {
		return nil, fmt.Errorf("keep the room key: %w", err)
	}
	b, err := rdb.Get(ctx, key).Bytes()
	if err != nil {
		return nil, fmt.Errorf("read the room key: %w", err)
	}
	return b, nil
}
