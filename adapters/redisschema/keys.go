// Package redisschema is what the Redis adapters agree on: the key layout of
// a sale and the order message the claim script appends to a voucher's
// stream. The gate writes both and the stream consumer reads both, so they
// are defined here once.
package redisschema

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/domain"
)

// DefaultPrefix starts every key the Redis adapters write.
const DefaultPrefix = "seckill:"

// A buyers hash holds one field per place a user holds in the sale: the
// user id for the first (hmdp's one-order mark), "<userId>:<n>" for the n-th
// of a sale that allows more (domain.Sale.LimitPerUser). Its value is the
// order id that holds the place, or, once that order was cancelled or expired
// and its place forfeited (the default; see SECKILL_RECLAIM_AFTER_CANCEL),
// the id negated: the place still counts toward the user's limit, so a claim
// answers duplicate, holds no unit, and still names its order, so a heal can
// tell it is there. Gates written before named forfeits hold "0" for one.

// PlaceField is the buyers-hash field of a user's place n (1-based).
func PlaceField(u domain.UserID, n int) string {
	if n <= 1 {
		return strconv.FormatInt(int64(u), 10)
	}
	return strconv.FormatInt(int64(u), 10) + ":" + strconv.Itoa(n)
}

// ParsePlaceField reads a buyers-hash field back.
func ParsePlaceField(f string) (domain.UserID, bool) {
	user, _, _ := strings.Cut(f, ":")
	u, err := strconv.ParseInt(user, 10, 64)
	return domain.UserID(u), err == nil && u > 0
}

// ParseMark reads a buyers-hash value: the order that holds the place
// (held), or a forfeited place's order (not held; 0 for an unnamed one).
func ParseMark(v string) (id domain.OrderID, held bool, ok bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, false
	}
	if n <= 0 {
		return domain.OrderID(-n), false, true
	}
	return domain.OrderID(n), true, true
}

// Keys names the Redis keys of one voucher. Every per-voucher key carries the
// hash tag {<voucherId>}, so a script that touches them all runs on one Redis
// Cluster slot.
type Keys struct {
	// Voucher is a hash: stock (remaining), begin and end (unix ms, [begin, end)).
	Voucher string
	// Buyers is a hash of the users' places (PlaceField -> Mark): the
	// one-order-per-user mark, and the way a status query finds an order
	// that is still queued.
	Buyers string
	// Orders is the voucher's order stream; the claim script appends to it
	// (the order message, see EncodeOrder) when the gate enqueues. It never
	// expires on its own: it may hold entries not yet fulfilled, so trimming
	// and deleting it belong to the stream consumer.
	Orders string
	// Live is a plain set of the IDs of preheated vouchers, shared by all
	// vouchers (so it is outside every hash tag and never touched by a
	// script). Status queries and the stream consumer discover vouchers there.
	Live string

	tag string // <prefix>{<voucherId>}:
}

// KeysFor names an unsplit voucher's keys (KeysForTag). prefix must pass
// ValidatePrefix.
func KeysFor(prefix string, id domain.VoucherID) Keys { return KeysForTag(prefix, VoucherTag(id)) }

// Staging names a temporary hash a gate Restore fills before swapping it in.
// It shares the voucher's hash tag so the swap (RENAME) is one slot.
func (k Keys) Staging(token string) string { return k.tag + "restore:" + token }

// Returned is a voucher's set of the order ids whose units the gate was
// given back after the database cancelled them (StockGate.Return), so the
// heal never puts their marks back. It expires with the voucher hash.
func (k Keys) Returned() string { return k.tag + "returned" }

// Room names one of the voucher's waiting-room keys (adapters/redisroom):
// "" for its hash, or a part such as ":users". They share the voucher's hash
// tag, so every room script runs on one Redis Cluster slot.
func (k Keys) Room(part string) string { return k.tag + "room" + part }

// LiveSet is the set of preheated voucher IDs (Keys.Live).
func LiveSet(prefix string) string { return prefix + "vouchers" }

// StreamRegistry is the stream consumer's set of voucher IDs whose streams
// may still hold unfinished entries.
func StreamRegistry(prefix string) string { return prefix + "streams" }

// DeadLetter is the default stream of order entries set aside for an operator.
func DeadLetter(prefix string) string { return prefix + "dead-letter" }

// ValidatePrefix refuses a prefix with a brace: Redis Cluster hashes the
// first {...} of a key, so the hash tag would come from the prefix instead of
// the voucher ID and every voucher would land on one slot (or, worse, a
// script's keys would not).
func ValidatePrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("key prefix %q must not contain '{' or '}' (it would take the voucher's hash tag)", prefix)
	}
	return nil
}

//go:embed controls.lua
var controlsLua string

// ControlsScript carries a sale's controls (end, pause, units added) to a
// voucher's or a bucket's hash.
var ControlsScript = redis.NewScript(controlsLua)
