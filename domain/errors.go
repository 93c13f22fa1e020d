package domain

import (
	"errors"
	"fmt"
	"slices"
)

// Refusal is a business answer to a claim, not a failure; its code goes unchanged from gate to client.
type Refusal struct {
	code string
	text string
}

func (r *Refusal) Error() string { return r.text }

// Code is the refusal's stable machine name, e.g. "sold_out".
func (r *Refusal) Code() string { return r.code }

// Business outcomes of a claim, in the order the claim script checks them.
var (
	ErrVoucherNotFound = &Refusal{"not_found", "voucher not found"}
	ErrNotStarted      = &Refusal{"not_started", "sale has not started"}
	ErrEnded           = &Refusal{"ended", "sale has ended"}
	ErrPaused          = &Refusal{"paused", "sale is paused"}
	ErrSoldOut         = &Refusal{"sold_out", "sold out"}
	ErrAlreadyClaimed  = &Refusal{"duplicate", "already claimed by this user"}
)

var refusals = []*Refusal{ErrVoucherNotFound, ErrNotStarted, ErrEnded, ErrPaused, ErrSoldOut, ErrAlreadyClaimed,
	ErrPassRequired, ErrPassExpired}

// Refusals lists every business refusal of a claim. The slice is a copy.
func Refusals() []*Refusal { return slices.Clone(refusals) }

// RefusalByCode maps a refusal's code back to it; false for anything else.
func RefusalByCode(code string) (*Refusal, bool) {
	i := slices.IndexFunc(refusals, func(r *Refusal) bool { return r.code == code })
	if i < 0 {
		return nil, false
	}
	return refusals[i], true
}

// IsRefusal reports whether err is, or wraps, a business refusal: final, and nothing changed.
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

// ErrOrderNotFound answers for an order that does not exist or is not the caller's.
var ErrOrderNotFound = errors.New("order not found")

type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason) }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

func parseEnum[T ~string](s, field, what string, valid ...T) (T, error) {
	if slices.Contains(valid, T(s)) {
		return T(s), nil
	}
	return "", invalid(field, "unknown %s %q", what, s)
}
