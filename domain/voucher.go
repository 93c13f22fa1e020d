package domain

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

type (
	VoucherID int64
	ShopID    int64
	UserID    int64
)

// VoucherType follows the original's tb_voucher.type column.
type VoucherType int8

const (
	VoucherNormal  VoucherType = 0
	VoucherSeckill VoucherType = 1
)

// Sale is the flash-sale part of a voucher: how many can be sold and when.
type Sale struct {
	stock      int
	begin, end time.Time
	buckets    int       // parts the gate splits the stock into; 0 and 1: one
	room       RoomRules // zero: no waiting room
	added      int       // units admins added since creation (AddStock)
	paused     bool      // claims answer ErrPaused until resumed
	limit      int       // orders one user may hold; 0 and 1: one
}

const (
	MaxBuckets = 16      // more than the gate's shards gains nothing; each adds transfers at the end
	MaxStock   = 1 << 30 // fits the original's INT column and a Redis integer
)

// NewSale validates the stock and the window [begin, end).
func NewSale(stock int, begin, end time.Time) (Sale, error) {
	switch {
	case stock <= 0:
		return Sale{}, invalid("stock", "must be greater than 0, got %d", stock)
	case stock > MaxStock:
		return Sale{}, invalid("stock", "must be at most %d, got %d", MaxStock, stock)
	case begin.IsZero():
		return Sale{}, invalid("beginTime", "is required")
	case end.IsZero():
		return Sale{}, invalid("endTime", "is required")
	case !end.After(begin):
		return Sale{}, invalid("endTime", "must be after beginTime")
	}
	return Sale{stock: stock, begin: begin, end: end}, nil
}

// NewSaleAt is NewSale for a sale created at now: it also refuses a window already ended.
func NewSaleAt(now time.Time, stock int, begin, end time.Time) (Sale, error) {
	s, err := NewSale(stock, begin, end)
	if err == nil && s.Ended(now) {
		return Sale{}, invalid("endTime", "must be later than now: a sale that has already ended can never be claimed")
	}
	return s, err
}

func (s Sale) Stock() int       { return s.stock }
func (s Sale) Begin() time.Time { return s.begin }
func (s Sale) End() time.Time   { return s.end }
func (s Sale) IsZero() bool     { return s.begin.IsZero() }

// Buckets is how many parts the gate splits the sale's stock into (1: whole).
func (s Sale) Buckets() int { return max(s.buckets, 1) }

// WithBuckets returns the sale split into k buckets, 1..MaxBuckets, each with at least one unit.
func (s Sale) WithBuckets(k int) (Sale, error) {
	switch {
	case k < 1 || k > MaxBuckets:
		return Sale{}, invalid("buckets", "must be between 1 and %d, got %d", MaxBuckets, k)
	case k > 1 && s.stock < k:
		return Sale{}, invalid("buckets", "must not exceed the stock (%d), got %d", s.stock, k)
	}
	s.buckets = unsplit(k)
	return s, nil
}

// Check tells whether a claim at now may take a unit of remaining; the Redis claim script mirrors it.
func (s Sale) Check(now time.Time, remaining int) error {
	switch {
	case !s.Started(now):
		return ErrNotStarted
	case s.Ended(now):
		return ErrEnded
	case s.paused:
		return ErrPaused
	case remaining <= 0:
		return ErrSoldOut
	}
	return nil
}

// Started and Ended tell whether the window [begin, end) has begun, or is over, at now.
func (s Sale) Started(now time.Time) bool { return !now.Before(s.begin) }
func (s Sale) Ended(now time.Time) bool   { return Ended(s.end, now) }
func Ended(end, now time.Time) bool       { return !now.Before(end) }

var ErrNotSeckill = invalid("type", "must be a seckill voucher with a sale")

// Voucher is a shop's voucher; a seckill voucher also has a Sale.
type Voucher struct {
	id     VoucherID
	spec   VoucherSpec
	typ    VoucherType
	status int8
	sale   Sale
}

// VoucherSpec is what a caller provides to create a seckill voucher.
type VoucherSpec struct {
	ShopID                 ShopID
	Title, SubTitle, Rules string
	PayValue, ActualValue  int64
}

const maxTitleLen, maxRulesLen = 255, 1024 // the original's column sizes

// NewSeckillVoucher validates a new seckill voucher (ID 0 until a repository assigns one).
func NewSeckillVoucher(spec VoucherSpec, sale Sale) (Voucher, error) {
	for _, f := range [...]struct{ name, text string }{
		{"title", spec.Title}, {"subTitle", spec.SubTitle}, {"rules", spec.Rules},
	} {
		// MySQL drops a NUL silently, and a line break or escape is nothing a shop means to show.
		if i := strings.IndexFunc(f.text, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
			return Voucher{}, invalid(f.name, "must not hold control characters, got %U at byte %d", rune(f.text[i]), i)
		}
	}
	switch {
	case spec.ShopID <= 0:
		return Voucher{}, invalid("shopId", "must be a positive id")
	case strings.TrimSpace(spec.Title) == "":
		return Voucher{}, invalid("title", "is required")
	case utf8.RuneCountInString(spec.Title) > maxTitleLen:
		return Voucher{}, invalid("title", "must be at most %d characters", maxTitleLen)
	case utf8.RuneCountInString(spec.SubTitle) > maxTitleLen:
		return Voucher{}, invalid("subTitle", "must be at most %d characters", maxTitleLen)
	case utf8.RuneCountInString(spec.Rules) > maxRulesLen:
		return Voucher{}, invalid("rules", "must be at most %d characters", maxRulesLen)
	case spec.PayValue < 0:
		return Voucher{}, invalid("payValue", "must not be negative")
	case spec.ActualValue < 0:
		return Voucher{}, invalid("actualValue", "must not be negative")
	case sale.IsZero():
		return Voucher{}, invalid("sale", "is required for a seckill voucher")
	}
	return Voucher{spec: spec, typ: VoucherSeckill, status: 1, sale: sale}, nil
}

// UnmarshalVoucherFromDatabase rebuilds a stored voucher (sale zero if normal). Only for repositories.
func UnmarshalVoucherFromDatabase(id VoucherID, spec VoucherSpec, typ VoucherType, status int8, sale Sale) Voucher {
	return Voucher{id: id, spec: spec, typ: typ, status: status, sale: sale}
}

// UnmarshalSplitSaleFromDatabase rebuilds a stored sale (stock may be 0). Only for repositories.
func UnmarshalSplitSaleFromDatabase(stock int, begin, end time.Time, buckets int) Sale {
	return Sale{stock: stock, begin: begin, end: end, buckets: unsplit(buckets)}
}

// WithStoredWindow is the sale with its window as stored. Use it only in repositories and gates.
func (s Sale) WithStoredWindow(begin, end time.Time) Sale { s.begin, s.end = begin, end; return s }

// unsplit keeps one representation of 1 (0), so sales compare equal however they were made.
func unsplit(k int) int {
	if k <= 1 {
		return 0
	}
	return k
}

func (v Voucher) WithID(id VoucherID) Voucher { v.id = id; return v }

// WithStock is the voucher with its sale's stock replaced (e.g. by what the database has left).
func (v Voucher) WithStock(stock int) Voucher { v.sale.stock = stock; return v }

func (v Voucher) ID() VoucherID      { return v.id }
func (v Voucher) ShopID() ShopID     { return v.spec.ShopID }
func (v Voucher) Title() string      { return v.spec.Title }
func (v Voucher) SubTitle() string   { return v.spec.SubTitle }
func (v Voucher) Rules() string      { return v.spec.Rules }
func (v Voucher) PayValue() int64    { return v.spec.PayValue }
func (v Voucher) ActualValue() int64 { return v.spec.ActualValue }
func (v Voucher) Type() VoucherType  { return v.typ }
func (v Voucher) Status() int8       { return v.status }
func (v Voucher) Sale() Sale         { return v.sale }
func (v Voucher) IsSeckill() bool    { return v.typ == VoucherSeckill && !v.sale.IsZero() }

// CheckGateable tells why a stock gate cannot hold v (a stored seckill voucher), or nil.
func (v Voucher) CheckGateable() error {
	if v.id <= 0 {
		return errors.New("voucher has no id yet")
	}
	if !v.IsSeckill() {
		return fmt.Errorf("voucher %d is not a seckill voucher", v.id)
	}
	return nil
}

// MaxLimitPerUser keeps small the claim's cost, which looks at each of a buyer's places.
const MaxLimitPerUser = 10

// LimitPerUser is how many orders of the sale one user may hold, cancelled ones included.
func (s Sale) LimitPerUser() int { return max(s.limit, 1) }

// WithLimitPerUser returns the sale allowing n orders per user; one with a waiting room keeps 1.
func (s Sale) WithLimitPerUser(n int) (Sale, error) {
	switch {
	case n < 1 || n > MaxLimitPerUser:
		return Sale{}, invalid("limitPerUser", "must be between 1 and %d, got %d", MaxLimitPerUser, n)
	case n > 1 && s.HasRoom():
		return Sale{}, invalid("limitPerUser",
			"must be 1 for a sale with a waiting room (a pass admits one order), got %d", n)
	}
	s.limit = unsplit(n)
	return s, nil
}

// WithStoredLimit is the sale with its stored limit per user. Use it only in repositories.
func (s Sale) WithStoredLimit(n int) Sale { s.limit = unsplit(n); return s }

// BuyerMarks turns v's orders into each user's marks, refusing an order of another voucher or
// a user past the limit (a gate rebuilt from them would be wrong). A repeated id counts once.
func BuyerMarks(v Voucher, orders []VoucherOrder) (map[UserID][]OrderID, error) {
	limit := v.sale.LimitPerUser()
	marks := make(map[UserID][]OrderID, len(orders))
	seen := make(map[OrderID]bool, len(orders))
	for _, o := range orders {
		if o.voucherID != v.id {
			return nil, fmt.Errorf("voucher %d: buyer %s belongs to another voucher", v.id, o)
		}
		if seen[o.id] {
			continue
		}
		seen[o.id] = true
		if len(marks[o.userID]) >= limit {
			return nil, fmt.Errorf("voucher %d: user %d holds orders %v and %d, more than the limit of %d",
				v.id, o.userID, marks[o.userID], o.id, limit)
		}
		marks[o.userID] = append(marks[o.userID], o.Mark())
	}
	return marks, nil
}

// KeepQueued adds to marks the places of orders still queued and reports how many; one past its
// user's limit is skipped (the database will refuse it), as refusing the rebuild leaves no gate.
func KeepQueued(marks map[UserID][]OrderID, s Sale, queued []VoucherOrder) int {
	added := 0
	for _, o := range queued {
		held := marks[o.userID]
		if len(held) >= s.LimitPerUser() || slices.Contains(held, o.id) || slices.Contains(held, -o.id) {
			continue
		}
		marks[o.userID] = append(held, o.Mark())
		added++
	}
	return added
}

// Mark is what the gate keeps in the order's place: its id, negated once forfeited
// (it still counts toward the limit, and no return can give its unit back twice).
func (o VoucherOrder) Mark() OrderID {
	if o.forfeited {
		return -o.id
	}
	return o.id
}

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
