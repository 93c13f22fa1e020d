// Package redissession resolves login tokens as the original hmdp stores them
// (the hash login:token:<token>, field id) and mints them for development and
// load tests. Sessions, the session cache, is kept honest by CLIENT TRACKING.
package redissession

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

const (
	DefaultPrefix = "login:token:"
	DefaultTTL    = 30 * time.Minute
	DefaultWait   = time.Second
)

// usable refuses absurd header values before they become keys or entries (tokens are 32 characters).
func usable(token string) bool { return token != "" && len(token) <= 128 }

type Options struct {
	Prefix string        // of the session hash's key (default "login:token:")
	TTL    time.Duration // of a minted session, and what a refresh sets it back to (default 30 minutes)
	// Lookups carries a request's lookup, typically an AutoPipeliner (redisx.Do); nil: the client given to New.
	Lookups redis.UniversalClient
	Wait    time.Duration // bounds a lookup's wait on Redis (default 1s), within the claim's budget
	// Bound, when set, gives a lookup its Wait deadline without a timer of its own; nil: context.WithDeadline.
	Bound func(ctx context.Context, deadline time.Time) context.Context
}

// Store reads and mints sessions in Redis.
type Store struct {
	rdb, lookups     redis.UniversalClient
	slack, ttl, wait time.Duration
	prefix           string
	bound            func(ctx context.Context, deadline time.Time) context.Context
}

var _ ports.TokenIssuer = (*Store)(nil)

// New panics on a nil client, a wiring mistake that must stop the start.
func New(rdb redis.UniversalClient, opts Options) *Store {
	if rdb == nil {
		panic("redissession: New needs a non-nil Redis client")
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Wait <= 0 {
		opts.Wait = DefaultWait
	}
	return &Store{rdb: rdb, lookups: cmp.Or(opts.Lookups, rdb), slack: min(refreshSlack, opts.TTL/2),
		prefix: cmp.Or(opts.Prefix, DefaultPrefix), ttl: opts.TTL, wait: opts.Wait, bound: opts.Bound}
}

// refreshSlack: a refresh is skipped while more than TTL - slack is left, so a
// stampede writes a token (invalidating every tracking cache) at most once per slack.
const refreshSlack = 10 * time.Second

// lookup reads a session's user id and PTTL in one batch and, as the original's
// RefreshTokenInterceptor, pushes its expiry back to TTL when less than TTL - slack
// is left. life is how long the session lives from now (0: gone).
func (s *Store) lookup(ctx context.Context, token string) (id domain.UserID, life time.Duration, err error) {
	key := s.prefix + token
	// A timer per lookup is costly in a sale of cold sessions; a shared one (Bound) does not.
	if s.bound != nil {
		ctx = s.bound(ctx, time.Now().Add(s.wait))
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Now().Add(s.wait))
		defer cancel()
	}
	get := redis.NewStringCmd(ctx, "hget", key, "id")
	left := redis.NewDurationCmd(ctx, time.Millisecond, "pttl", key)
	if err := redisx.Do(ctx, s.lookups, get, left); err != nil {
		return 0, 0, fmt.Errorf("look up session: %w", err)
	}
	id, ttl, err := parse(get, left)
	if err != nil {
		return 0, 0, err
	}
	life = s.lifeOf(ttl)
	if ttl >= 0 && ttl < s.ttl-s.slack {
		// Not awaited: were it lost, the next lookup past the slack sends it again.
		s.sendRefresh(ctx, key)
		life = s.ttl
	}
	return id, life, nil
}

func (s *Store) sendRefresh(ctx context.Context, key string) {
	redisx.Send(ctx, s.lookups, redis.NewBoolCmd(ctx, "pexpire", key, s.ttl.Milliseconds()))
}

// lifeOf reads a PTTL answer: TTL for no expiry (-1), 0 for gone (-2); go-redis keeps both unscaled.
func (s *Store) lifeOf(pttl time.Duration) time.Duration {
	switch {
	case pttl > 0:
		return pttl
	case pttl == -1:
		return s.ttl
	default:
		return 0
	}
}

// parse reads a session's id and PTTL: ErrUnknownToken for a missing session or a malformed id.
func parse(get *redis.StringCmd, left *redis.DurationCmd) (domain.UserID, time.Duration, error) {
	raw, err := get.Result()
	if errors.Is(err, redis.Nil) {
		return 0, 0, ports.ErrUnknownToken
	}
	if err != nil {
		return 0, 0, fmt.Errorf("look up session: %w", err)
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, 0, ports.ErrUnknownToken
	}
	ttl, err := left.Result()
	if err != nil {
		return 0, 0, fmt.Errorf("look up session: %w", err)
	}
	return domain.UserID(id), ttl, nil
}

// Mint writes the original login's hash (id, nickName, icon) and its TTL in one MULTI.
func (s *Store) Mint(ctx context.Context, user domain.UserID) (string, error) {
	if user <= 0 {
		return "", &domain.ValidationError{Field: "userId", Reason: "must be a positive id"}
	}
	token := NewToken()
	key := s.prefix + token
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "id", int64(user), "nickName", fmt.Sprintf("user_%d", user), "icon", "")
		p.Expire(ctx, key, s.ttl)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("mint session for user %d: %w", user, err)
	}
	return token, nil
}

// NewToken returns 32 random hex characters, the shape of the original's dash-less UUIDs.
func NewToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails since Go 1.24
	return hex.EncodeToString(b)
}
