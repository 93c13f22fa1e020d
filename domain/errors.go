package domain

import (
	"errors"
	"fmt"
)

// Business outcomes of a claim. They are expected answers, not failures: the
// HTTP adapter turns each into a success=false envelope with a stable code.
var (
	ErrSoldOut         = errors.New("sold out")
	ErrAlreadyClaimed  = errors.New("already claimed by this user")
	ErrNotStarted      = errors.New("sale has not started")
	ErrEnded           = errors.New("sale has ended")
	ErrVoucherNotFound = errors.New("voucher not found")
	ErrOrderNotFound   = errors.New("order not found")
)

// ValidationError says which input was rejected and why. Constructors return it
// so that bad input is refused before anything is stored.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason)
}

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
