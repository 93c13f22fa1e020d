// Package redissession resolves login tokens the way the original hmdp stores
// them (the Redis hash login:token:<token>, field id) and mints such tokens for
// development and load tests. Cached puts a small in-process cache in front,
// so a repeat request costs no Redis round trip. Its bound: a token deleted or
// expired in Redis keeps resolving, on an instance that cached it, for up to
// the cache's TTL (default 10s).
package redissession

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redisbatch"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Defaults of Options.
const (
	DefaultPrefix = "login:token:"
	DefaultTTL    = 30 * time.Minute
)

// maxTokenLen refuses absurd header values before they become Redis keys or
// cache entries; minted tokens are 32 characters, the original's UUIDs 32 too.
const maxTokenLen = 128

// Options configures a Store.
type Options struct {
	// Prefix of the session hash's key (default "login:token:").
	Prefix string
	// TTL of a minted session (default 30 minutes, as the original). Unlike
	// the original it is not refreshed on each request: that would cost a
	// second round trip per claim.
	TTL time.Duration
	// Lookups carries UserID's HGET: typically the client's asynchronous
	// AutoPipeliner (see redisbatch). Nil means the client given to New.
	Lookups redis.UniversalClient
}

// Store reads and mints sessions in Redis.
type Store struct {
	rdb     redis.UniversalClient
	lookups redis.UniversalClient
	prefix  string
	ttl     time.Duration
}

var (
	_ ports.Sessions    = (*Store)(nil)
	_ ports.TokenIssuer = (*Store)(nil)
)

// New panics on a nil client, a wiring mistake that must stop the start.
func New(rdb redis.UniversalClient, opts Options) *Store {
	if rdb == nil {
		panic("redissession: New needs a non-nil Redis client")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Lookups == nil {
		opts.Lookups = rdb
	}
	return &Store{rdb: rdb, lookups: opts.Lookups, prefix: opts.Prefix, ttl: opts.TTL}
}

// UserID reads only the id field (HGET, not the original's HGETALL): it is all
// the claim path needs.
func (s *Store) UserID(ctx context.Context, token string) (domain.UserID, error) {
	if token == "" || len(token) > maxTokenLen {
		return 0, ports.ErrUnknownToken
	}
	cmd := redis.NewStringCmd(ctx, "hget", s.prefix+token, "id")
	if err := redisbatch.Do(ctx, s.lookups, cmd); err != nil {
		return 0, fmt.Errorf("look up session: %w", err)
	}
	raw, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return 0, ports.ErrUnknownToken
	}
	if err != nil {
		return 0, fmt.Errorf("look up session: %w", err)
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, ports.ErrUnknownToken
	}
	return domain.UserID(id), nil
}

// Mint writes the hash the original's login writes (id, nickName, icon) and
// its TTL in one MULTI, so no session is left without an expiry.
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

// NewToken returns 32 random hex characters, the shape of the original's
// dash-less UUID tokens.
func NewToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails since Go 1.24
	return hex.EncodeToString(b)
}
