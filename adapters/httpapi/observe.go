package httpapi

import (
	"context"
	"time"
)

// ClaimObserver is told how every request to the claim route was answered,
// including the answers the edge gives before the claim runs (no token, rate
// limited, bad path). Metrics implement it; the router calls it only when one
// is given, so without it the claim path pays nothing.
type ClaimObserver interface {
	// ClaimStarted may return a context carrying what the observer needs
	// (a counter its Redis hook increments); the request goes on with it,
	// and ClaimAnswered gets it back. Returning ctx itself costs nothing: the
	// request is copied only for a new context.
	ClaimStarted(ctx context.Context) context.Context
	// ClaimAnswered gets the answer's code: "success", a refusal's code, or
	// the code of the error envelope (unauthorized, rate_limited, busy,
	// internal ...), and how long the claim took.
	ClaimAnswered(ctx context.Context, code string, took time.Duration)
}

// claimPathPrefix is the claim route's path up to its id. The observer
// matches on it rather than on chi's route pattern, which is not set yet
// when a middleware in front of routing refuses the request.
const claimPathPrefix = "/voucher-order/seckill/"

// codeSuccess names a successful claim for observers; the envelope itself
// carries no code on success.
const codeSuccess = "success"

// answeredCode is the code of the answer rec recorded: the code its error
// maps to through the table, or "success" for a 2xx without error. Every
// refusal on the claim route (the limits', the session's, a bad path's) is
// written by fail, which records its error; a 3xx-5xx without one is no
// answer of this router's, so internal.
func answeredCode(rec *recorder) string {
	switch {
	case rec.err != nil:
		return answerFor(rec.err).code
	case rec.status < 300:
		return codeSuccess
	}
	return codeInternal
}
