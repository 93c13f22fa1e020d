package httpapi

import (
	"context"
	"net/http"
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
// maps to through the table, "success" for a 2xx without error, and for an
// answer written without fail (a middleware answering on its own) a code
// guessed from the status.
func answeredCode(rec *recorder) string {
	if rec.err != nil {
		return answerFor(rec.err).code
	}
	switch {
	case rec.status < 300:
		return codeSuccess
	case rec.status == http.StatusTooManyRequests:
		return codeRateLimited
	case rec.status == http.StatusUnauthorized:
		return codeUnauthorized
	case rec.status == http.StatusServiceUnavailable:
		return codeBusy
	}
	return codeInternal
}
