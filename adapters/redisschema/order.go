package redisschema

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/domain"
)

// The order message's fields, each a decimal integer. The claim script gets
// them from EncodeOrder (it XADDs its ARGV tail as they are), so this is the
// only place they are named.
const (
	FieldOrderID   = "id"
	FieldUserID    = "userId"
	FieldVoucherID = "voucherId"
)

// OrderFields lists the message's fields in the order EncodeOrder writes them.
var OrderFields = [...]string{FieldOrderID, FieldUserID, FieldVoucherID}

// ErrBadOrderMessage is what every DecodeOrder error wraps: the entry does not
// carry a valid order and will not on a second read (poison).
var ErrBadOrderMessage = errors.New("not a valid order message")

// EncodeOrder is the order message as field, value pairs for XADD (and for
// the claim script's ARGV).
func EncodeOrder(o domain.VoucherOrder) []any {
	return []any{
		FieldOrderID, int64(o.ID()),
		FieldUserID, int64(o.UserID()),
		FieldVoucherID, int64(o.VoucherID()),
	}
}

// DecodeOrder turns a stream entry into the order it carries. The entry must
// carry every field of OrderFields as a decimal integer, make a valid order,
// and be for vid, the voucher whose stream it was read from. Other fields are
// ignored, so a producer may add some.
func DecodeOrder(vid domain.VoucherID, m redis.XMessage) (domain.VoucherOrder, error) {
	if len(m.Values) == 0 {
		return domain.VoucherOrder{}, fmt.Errorf("%w: entry has no fields (deleted while pending?)", ErrBadOrderMessage)
	}
	var n [len(OrderFields)]int64
	for i, f := range OrderFields {
		v, ok := m.Values[f]
		if !ok {
			return domain.VoucherOrder{}, fmt.Errorf("%w: field %s is missing", ErrBadOrderMessage, f)
		}
		s, ok := v.(string)
		if !ok {
			return domain.VoucherOrder{}, fmt.Errorf("%w: field %s is a %T, not a string", ErrBadOrderMessage, f, v)
		}
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return domain.VoucherOrder{}, fmt.Errorf("%w: field %s=%q is not an integer", ErrBadOrderMessage, f, s)
		}
		n[i] = x
	}
	if domain.VoucherID(n[2]) != vid {
		return domain.VoucherOrder{}, fmt.Errorf("%w: voucherId %d is not the voucher %d of its stream", ErrBadOrderMessage, n[2], vid)
	}
	o, err := domain.NewVoucherOrder(domain.OrderID(n[0]), domain.UserID(n[1]), domain.VoucherID(n[2]))
	if err != nil {
		return domain.VoucherOrder{}, fmt.Errorf("%w: %w", ErrBadOrderMessage, err)
	}
	return o, nil
}
