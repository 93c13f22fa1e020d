package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/hmdp-go/seckill/domain"
)

var okBody = mustEncode(envelope{Success: true, Data: "ok"})

// healthz says the process serves HTTP; it checks no backend, so a Redis
// outage does not get every instance restarted at once.
func (a *api) healthz(w http.ResponseWriter, _ *http.Request) {
	writeBody(w, http.StatusOK, okBody)
}

// readyz says whether Redis and the database answer. Why not is logged, never
// sent: the probe is unauthenticated.
// The outcome is shared by the probes of Deps.PublicReadTTL.
func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	_, err := a.readiness.get(r.Context(), "", func(ctx context.Context) (struct{}, error) {
		ctx, cancel := context.WithTimeout(ctx, readyTimeout)
		defer cancel()
		return struct{}{}, a.Ready(ctx)
	})
	if err != nil {
		noteError(r, fmt.Errorf("not ready: %w", err))
		writeBody(w, notReadyAnswer.status, notReadyAnswer.body)
		return
	}
	writeBody(w, http.StatusOK, okBody)
}

// mintToken is for development and load tests only: it logs in as any user
// without a password. NewRouter mounts it only when Deps.Tokens is set, which
// production configuration must not do.
func (a *api) mintToken(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		UserID int64 `json:"userId"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.UserID <= 0 {
		return &domain.ValidationError{Field: "userId", Reason: "must be a positive id"}
	}
	token, err := a.Tokens.Mint(r.Context(), domain.UserID(req.UserID))
	if err != nil {
		return fmt.Errorf("mint token for user %d: %w", req.UserID, err)
	}
	writeOK(w, token)
	return nil
}
