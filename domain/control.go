package domain

import "time"

// ControlError refuses an admin's sale control that cannot apply to the sale
// as it stands (it has ended, its new end would be in the past): the input
// was well formed, the sale's state says no. Its code is stable, like a
// Refusal's (Code, e.g. "sale_over"), and nothing changed. It is a type of
// its own so that it is not taken for a claim's Refusal.
type ControlError struct{ Refusal }

// The sale controls' refusals.
var (
	ErrSaleOver       = &ControlError{Refusal{"sale_over", "the sale has already ended"}}
	ErrSaleNotStarted = &ControlError{Refusal{"sale_not_started", "the sale has not started: move its end time instead"}}
	ErrEndInPast      = &ControlError{Refusal{"end_in_past", "the new end time is in the past"}}
	ErrEndBeforeBegin = &ControlError{Refusal{"end_before_begin", "the new end time is not after the sale's begin time"}}
)

// EndAt is the sale with its end moved to end (later or earlier), as an
// admin asks at now. Moving it to where it is changes nothing and is no
// error (a retried request). A sale that has ended stays ended; an end
// before now or not after the begin would make a window nobody asked for.
func (s Sale) EndAt(end, now time.Time) (Sale, error) {
	switch {
	case end.IsZero():
		return Sale{}, invalid("endTime", "is required")
	case end.Equal(s.end):
		return s, nil
	case s.Ended(now):
		return Sale{}, ErrSaleOver
	case !end.After(s.begin):
		return Sale{}, ErrEndBeforeBegin
	case end.Before(now):
		return Sale{}, ErrEndInPast
	}
	s.end = end
	return s, nil
}

// EndNow is the sale ended at now; a sale already ended is left as it is
// (ending it again is a retry, not an error). A sale that has not begun
// has no now to end at: its end is moved instead (EndAt).
func (s Sale) EndNow(now time.Time) (Sale, error) {
	switch {
	case s.Ended(now):
		return s, nil
	case !s.Started(now):
		return Sale{}, ErrSaleNotStarted
	}
	s.end = now
	return s, nil
}

// AddStock is the sale with n more units to sell, as an admin asks at now.
// Only a sale that has not ended takes stock: units added to an ended sale
// could never be sold.
func (s Sale) AddStock(n int, now time.Time) (Sale, error) {
	switch {
	case n <= 0:
		return Sale{}, invalid("add", "must be greater than 0, got %d", n)
	case n > MaxStock || s.stock > MaxStock-n:
		return Sale{}, invalid("add", "would make the stock more than %d", MaxStock)
	case s.Ended(now):
		return Sale{}, ErrSaleOver
	}
	s.stock += n
	s.added += n
	return s, nil
}

// SameControls tells whether o is s in everything a control changes (the
// stock, the end, the pause): storing o over s changes nothing, as a
// retried control's does not.
func (s Sale) SameControls(o Sale) bool {
	return s.stock == o.stock && s.end.Equal(o.end) && s.paused == o.paused
}

// Added is every unit admins added to the sale (AddStock) since it was
// created; the gate keeps the same total, which makes adding them to the
// gate idempotent.
func (s Sale) Added() int { return s.added }

// Paused tells whether claims of the sale answer ErrPaused.
func (s Sale) Paused() bool { return s.paused }

// WithStoredControls is the sale with its controls as stored. Use it only
// in repositories.
func (s Sale) WithStoredControls(added int, paused bool) Sale {
	s.added, s.paused = added, paused
	return s
}

// WithSale is the voucher with its sale changed by a control (EndAt,
// EndNow, AddStock).
func (v Voucher) WithSale(s Sale) Voucher { v.sale = s; return v }

// WithPause is the sale paused (paused true) or resumed, as an admin asks at
// now. Asking for what it already is changes nothing. A sale that has ended
// takes neither: its claims answer ended either way.
func (s Sale) WithPause(paused bool, now time.Time) (Sale, error) {
	if s.paused == paused {
		return s, nil
	}
	if s.Ended(now) {
		return Sale{}, ErrSaleOver
	}
	s.paused = paused
	return s, nil
}

// MaxIdempotencyKey is the longest Idempotency-Key accepted (the column size).
const MaxIdempotencyKey = 128

// CheckIdempotencyKey refuses an Idempotency-Key (empty: none) that is
// longer than MaxIdempotencyKey or not printable ASCII without spaces.
func CheckIdempotencyKey(key string) error {
	switch {
	case len(key) > MaxIdempotencyKey:
		return invalid("Idempotency-Key", "must be at most %d characters", MaxIdempotencyKey)
	case !Printable(key):
		return invalid("Idempotency-Key", "must be printable ASCII without spaces")
	}
	return nil
}

// ControlKeyReused refuses an Idempotency-Key recorded for another control
// request (another voucher, action or amount): nothing changed.
func ControlKeyReused() error {
	return invalid("Idempotency-Key", "was already used for another request; use a new key for a new request")
}
