package redisschema

import (
	"strconv"
	"strings"

	"github.com/hmdp-go/seckill/domain"
)

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
		if err != nil || k < 2 || k > MaxBuckets {
			return OrderIndex{}, false
		}
		idx.Buckets = k
	}
	return idx, true
}
