package redisschema

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/domain"
)

// The order message's fields, each a decimal integer. This is the only place
// they are named: Go writes the message with EncodeOrder, and the claim
// scripts are built with OrderScript.
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
	return []any{
		FieldOrderID, int64(o.ID()),
		FieldUserID, int64(o.UserID()),
		FieldVoucherID, int64(o.VoucherID()),
	}
}

// OrderMessage marks, in a claim script's source, where the order message's
// XADD arguments go: redis.call('XADD', KEYS[3], '*', ORDER_MESSAGE).
const OrderMessage = "ORDER_MESSAGE"

// OrderScript renders a claim script: src with its one OrderMessage replaced
// by the message's fields in EncodeOrder's order, each name quoted and each
// value the Lua expression given for it (a script argument such as
// "ARGV[2]", holding the ID's decimal string). The script then appends the
// same message EncodeOrder writes, from the IDs the claim passes anyway, so
// a claim sends no field names and no second copy of the IDs, and the
// layout is still defined here alone. It panics unless src holds
// OrderMessage exactly once: scripts are embedded, so that is a mistake in
// the build, not in the input.
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

// OrderIndexKey names an order's index entry, which a claim writes in its
// own round trip so a status query finds a queued order in O(1): it says
// which voucher (and, for a split voucher, how many buckets) holds the
// order's buyer mark. It carries no hash tag: each entry may live anywhere.
func OrderIndexKey(prefix string, id domain.OrderID) string {
	// One allocation, the string: each claim writes one.
	var buf [64]byte
	b := append(append(buf[:0], prefix...), "order:"...)
	return string(strconv.AppendInt(b, int64(id), 10))
}

// OrderIndex is what an index entry says: the order's voucher and user, and
// Buckets, the voucher's K when it is split (1 otherwise).
type OrderIndex struct {
	Voucher domain.VoucherID
	User    domain.UserID
	Buckets int
}

// EncodeOrderIndex is "<voucher>:<user>", or "<voucher>:<user>:<K>" for a
// split voucher.
func EncodeOrderIndex(o domain.VoucherOrder, buckets int) string {
	var buf [48]byte
	b := strconv.AppendInt(buf[:0], int64(o.VoucherID()), 10)
	b = strconv.AppendInt(append(b, ':'), int64(o.UserID()), 10)
	if buckets > 1 {
		b = strconv.AppendInt(append(b, ':'), int64(buckets), 10)
	}
	return string(b)
}

// DecodeOrderIndex reads an entry; false for anything EncodeOrderIndex does
// not write (a status query then answers "not queued").
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
