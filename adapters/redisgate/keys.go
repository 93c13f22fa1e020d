package redisgate

import (
	"strconv"
	"strings"

	"github.com/hmdp-go/seckill/domain"
)

// DefaultPrefix starts every key the gate writes.
const DefaultPrefix = "seckill:"

// Keys names the Redis keys of one voucher's gate state. Every per-voucher key
// carries the hash tag {<voucherId>}, so a script that touches them all runs on
// one Redis Cluster slot.
type Keys struct {
	// Voucher is a hash: stock (remaining), begin and end (unix ms, [begin, end)).
	Voucher string
	// Buyers is a hash userId -> orderId: the one-order-per-user mark, and the
	// way a status query finds an order that is still queued.
	Buyers string
	// Orders is the voucher's order stream; the claim script appends to it
	// only when the gate runs with Enqueue. It never expires on its own: it
	// may hold entries not yet fulfilled, so trimming and deleting it belong
	// to the stream consumer.
	Orders string
	// Live is a plain set of the IDs of preheated vouchers, shared by all
	// vouchers (so it is outside every hash tag and never touched by a
	// script). Status queries and the stream consumer discover vouchers there.
	Live string

	tag string // <prefix>{<voucherId>}:, for keys private to this package
}

// KeysFor is the one place the key layout is defined; the stream adapter
// reads the same keys through it. prefix must not contain '{' or '}', or the
// hash tag would be taken from the prefix instead of the voucher ID.
func KeysFor(prefix string, id domain.VoucherID) Keys {
	tag := prefix + "{" + strconv.FormatInt(int64(id), 10) + "}:"
	return Keys{
		Voucher: tag + "voucher",
		Buyers:  tag + "buyers",
		Orders:  tag + "orders",
		Live:    prefix + "vouchers",
		tag:     tag,
	}
}

// staging names a temporary hash Restore fills before swapping it in. It
// shares the voucher's hash tag so the swap (RENAME) is one slot.
func (k Keys) staging(token string) string { return k.tag + "restore:" + token }

func validPrefix(prefix string) bool { return !strings.ContainsAny(prefix, "{}") }
