package domain

import (
	"errors"
	"fmt"
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
	added      int       // units admins added since creation (control.go)
	paused     bool      // claims answer ErrPaused until resumed
	limit      int       // orders one user may hold (limit.go); 0 and 1: one
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
	if err != nil {
		return Sale{}, err
	}
	if s.Ended(now) {
		return Sale{}, invalid("endTime", "must be later than now: a sale that has already ended can never be claimed")
	}
	return s, nil
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
