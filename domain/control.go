package domain

import "time"

// ControlError refuses an admin control the sale's state rules out; nothing changed. It has a
// stable Code but is its own type, so it is not taken for a claim's Refusal.
type ControlError struct{ Refusal }

var (
	ErrSaleOver       = &ControlError{Refusal{"sale_over", "the sale has already ended"}}
	ErrSaleNotStarted = &ControlError{Refusal{"sale_not_started", "the sale has not started: move its end time instead"}}
	ErrEndInPast      = &ControlError{Refusal{"end_in_past", "the new end time is in the past"}}
	ErrEndBeforeBegin = &ControlError{Refusal{"end_before_begin", "the new end time is not after the sale's begin time"}}
)

// EndAt is the sale with its end moved, as an admin asks at now; an unmoved end is a retry.
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

// EndNow is the sale ended at now; an ended one is a retry, one not begun is EndAt's.
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

// AddStock is the sale with n more units to sell, as an admin asks at now; an ended sale takes none.
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

// SameControls tells whether o is s in everything a control changes (stock, end, pause).
func (s Sale) SameControls(o Sale) bool {
	return s.stock == o.stock && s.end.Equal(o.end) && s.paused == o.paused
}

// Added is every unit AddStock added; the gate keeps the same total, so adding them is idempotent.
func (s Sale) Added() int   { return s.added }
func (s Sale) Paused() bool { return s.paused }

// WithStoredControls is the sale with its controls as stored. Use it only in repositories.
func (s Sale) WithStoredControls(added int, paused bool) Sale {
	s.added, s.paused = added, paused
	return s
}

func (v Voucher) WithSale(s Sale) Voucher { v.sale = s; return v }

// WithPause is the sale paused or resumed at now; an ended sale takes neither.
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

const MaxIdempotencyKey = 128 // the column size

// CheckIdempotencyKey refuses an Idempotency-Key (empty: none) too long or not Printable.
func CheckIdempotencyKey(key string) error {
	switch {
	case len(key) > MaxIdempotencyKey:
		return invalid("Idempotency-Key", "must be at most %d characters", MaxIdempotencyKey)
	case !Printable(key):
		return invalid("Idempotency-Key", "must be printable ASCII without spaces")
	}
	return nil
}

func ControlKeyReused() error {
	return invalid("Idempotency-Key", "was already used for another request; use a new key for a new request")
}
