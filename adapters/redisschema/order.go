package redisschema

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/domain"
)

// The order message's fields, each a decimal integer, named only here: Go
// writes the message with EncodeOrder, the claim scripts get it from OrderScript.
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

// EncodeOrder is the order message as field, value pairs for XADD.
func EncodeOrder(o domain.VoucherOrder) []any {
	return []any{FieldOrderID, int64(o.ID()), FieldUserID, int64(o.UserID()), FieldVoucherID, int64(o.VoucherID())}
}

// OrderMessage marks where a claim script's XADD takes the message:
// redis.call('XADD', KEYS[3], '*', ORDER_MESSAGE).
const OrderMessage = "ORDER_MESSAGE"

// OrderScript renders a claim script: src's one OrderMessage becomes the message's
// fields, each value the Lua expression given (such as "ARGV[2]"); it panics unless
// src holds OrderMessage exactly once (scripts are embedded: a build mistake).
func OrderScript(src, orderID, userID, voucherID string) string {
	if n := strings.Count(src, OrderMessage); n != 1 {
		panic(fmt.Sprintf("redisschema: a claim script must hold %s once, found %d", OrderMessage, n))
	}
	var args []string
	for i, value := range [...]string{orderID, userID, voucherID} {
		args = append(args, "'"+OrderFields[i]+"'", value)
	}
	return strings.Replace(src, OrderMessage, strings.Join(args, ", "), 1)
}

// DecodeOrder turns an entry of voucher vid's stream into its order: every field of
// OrderFields must be a decimal integer making a valid order of vid; others are ignored.
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

// OrderIndexKey names an order's index entry (no hash tag), which says which voucher
// and K hold its buyer's mark. Built with one allocation: every claim writes one.
func OrderIndexKey(prefix string, id domain.OrderID) string {
	var buf [64]byte
	b := append(append(buf[:0], prefix...), "order:"...)
	return string(strconv.AppendInt(b, int64(id), 10))
}

// OrderIndex is an index entry: Buckets is the voucher's K (1 when unsplit).
type OrderIndex struct {
	Voucher domain.VoucherID
	User    domain.UserID
	Buckets int
}

// EncodeOrderIndex is "<voucher>:<user>", plus ":<K>" for a split voucher.
func EncodeOrderIndex(o domain.VoucherOrder, buckets int) string {
	var buf [48]byte
	b := strconv.AppendInt(buf[:0], int64(o.VoucherID()), 10)
	b = strconv.AppendInt(append(b, ':'), int64(o.UserID()), 10)
	if buckets > 1 {
		b = strconv.AppendInt(append(b, ':'), int64(buckets), 10)
	}
	return string(b)
}

// DecodeOrderIndex reads an entry; false for anything EncodeOrderIndex does not write.
func DecodeOrderIndex(raw string) (OrderIndex, bool) {
	parts := strings.Split(raw, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return OrderIndex{}, false
	}
	vid, err1 := strconv.ParseInt(parts[0], 10, 64)
	uid, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || vid <= 0 || uid <= 0 {
		return OrderIndex{}, false
	}
	idx := OrderIndex{Voucher: domain.VoucherID(vid), User: domain.UserID(uid), Buckets: 1}
	if len(parts) == 3 {
		k, err := strconv.Atoi(parts[2])
		if err != nil || k < 2 || k > domain.MaxBuckets {
			return OrderIndex{}, false
		}
		idx.Buckets = k
	}
	return idx, true
}
