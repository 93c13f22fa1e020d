package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// Sessions maps login tokens to users, which never expire here.
type Sessions struct {
	mu     mutex
	tokens map[string]domain.UserID
}

var (
	_ ports.Sessions    = (*Sessions)(nil)
	_ ports.TokenIssuer = (*Sessions)(nil)
)

func NewSessions() *Sessions {
	return &Sessions{tokens: make(map[string]domain.UserID)}
}

func (s *Sessions) UserID(ctx context.Context, token string) (domain.UserID, error) {
	return locked(ctx, &s.mu, func() (domain.UserID, error) {
		id, ok := s.tokens[token]
		if !ok {
			return 0, ports.ErrUnknownToken
		}
		return id, nil
	})
}

// Mint returns 32 random hex characters, like the Redis store's tokens.
func (s *Sessions) Mint(ctx context.Context, user domain.UserID) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if user <= 0 {
		return "", &domain.ValidationError{Field: "userId", Reason: "must be a positive id"}
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails since Go 1.24
	token := hex.EncodeToString(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = user
	return token, nil
}
