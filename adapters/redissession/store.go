// Package redissession resolves login tokens the way the original hmdp stores
// them (the Redis hash login:token:<token>, field id) and mints such tokens for
// development and load tests. Store reads and writes the hashes; Sessions,
// the one session cache, answers requests from memory, kept honest and filled
// by Redis's reports of each write to a session (CLIENT TRACKING).
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

	"github.com/hmdp-go/seckill/adapters/internal/redisx"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Defaults of Options.
const (
	DefaultPrefix = "login:token:"
	DefaultTTL    = 30 * time.Minute
	DefaultWait   = time.Second
)

// usable tells whether a token may be looked up or cached: it refuses absurd
// header values before they become Redis keys or cache entries; minted tokens
// are 32 characters, the original's UUIDs 32 too.
func usable(token string) bool { return token != "" && len(token) <= 128 }

// Options configures a Store.
type Options struct {
	// Prefix of the session hash's key (default "login:token:").
	Prefix string
	// TTL of a minted session (default 30 minutes, as the original), and
	// what a refresh sets it back to.
	TTL time.Duration
	// Lookups carries a request's lookup (HGET, PTTL, PEXPIRE): typically the client's asynchronous
	// AutoPipeliner (see redisx.Do). Nil means the client given to New.
	Lookups redis.UniversalClient
	// Wait bounds a lookup's wait on Redis (default 1s), so a request whose
	// session Redis cannot read (down, stalled, failing over) is answered
	// busy within the claim's budget rather than after the client's retries.
	Wait time.Duration
	// Bound, when set, gives a lookup its Wait deadline without a timer of
	// its own (infra passes the claims' shared deadlines,
	// application.SharedDeadlines.Context); nil gives each lookup its own
	// context.WithDeadline.
	Bound func(ctx context.Context, deadline time.Time) context.Context
}

// Store reads and mints sessions in Redis; Sessions looks tokens up through
// it.
type Store struct {
	rdb     redis.UniversalClient
	lookups redis.UniversalClient
	slack   time.Duration
	prefix  string
	ttl     time.Duration
	wait    time.Duration
	bound   func(ctx context.Context, deadline time.Time) context.Context
}

var _ ports.TokenIssuer = (*Store)(nil)

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
	if opts.Wait <= 0 {
		opts.Wait = DefaultWait
	}
	return &Store{rdb: rdb, lookups: opts.Lookups, slack: min(refreshSlack, opts.TTL/2), prefix: opts.Prefix, ttl: opts.TTL, wait: opts.Wait, bound: opts.Bound}
}

// refreshSlack: a refresh is skipped while more than TTL - slack is left
// (slack is 10s, at most half the TTL), so the expiry is at least TTL - slack
// after the last request.
const refreshSlack = 10 * time.Second

// lookup is a request's read of its session: the user (only the id field,
// HGET, not the original's HGETALL: it is all the claim path needs) and the
// session's remaining TTL in the same batch (PTTL: plain commands, a fraction
// of a script's cost in Redis); only when less than TTL - slack is left it
// pushes the expiry back to TTL with a PEXPIRE, as the original's
// RefreshTokenInterceptor does. The slack keeps a stampede of lookups (or of
// instances) from writing the key, and so from invalidating every tracking
// cache, on each request: a token is written at most once per slack.
//
// life is how long the session lives from now as far as this lookup knows
// (TTL when it sent the refresh, TTL as well for a session without expiry, 0
// for one that is gone).
//
// The two reads are not one atomic step: a token deleted between them reads
// as a user with no TTL (-2), which is not refreshed (and PEXPIRE on a key
// that is gone writes nothing), and the deletion's invalidation keeps the
// answer out of every cache.
func (s *Store) lookup(ctx context.Context, token string) (id domain.UserID, life time.Duration, err error) {
	key := s.prefix + token
	// A timer of its own per lookup (context.WithTimeout) costs 2% of the
	// service's CPU in a sale of cold sessions: lookups ending in the same
	// slot share one (Options.Bound), and such a lookup is not cut short
	// when its request is cancelled (a client gone): it waits for Redis's
	// answer, at most Wait, as it would for a client still there.
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
	// PTTL answers -1 (no expiry) and -2 (gone) as such durations.
	if ttl >= 0 && ttl < s.ttl-s.slack {
		// Sent, not awaited: on the automatic pipeliner it rides with
		// the claim's own batch, so sliding the expiry adds no round
		// trip; its answer is not needed (were it lost, the session
		// would merely lapse at its old expiry, and the next lookup
		// past the slack sends it again).
		s.sendRefresh(ctx, key)
		life = s.ttl
	}
	return id, life, nil
}

// sendRefresh pushes the session's expiry back to TTL from now, without
// waiting for the answer.
func (s *Store) sendRefresh(ctx context.Context, key string) {
	redisx.Send(ctx, s.lookups, redis.NewBoolCmd(ctx, "pexpire", key, s.ttl.Milliseconds()))
}

// lifeOf reads a PTTL answer: how long the session lives from now, TTL
// for one without expiry (-1), 0 for one that is gone (-2).
func (s *Store) lifeOf(pttl time.Duration) time.Duration {
	switch {
	case pttl > 0:
		return pttl
	case pttl == -1: // go-redis keeps -1 and -2 unscaled
		return s.ttl
	default:
		return 0
	}
}

// parse reads a session's HGET of its id field and its PTTL: a positive user
// id (ErrUnknownToken for a missing session or a malformed id) and the PTTL.
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
