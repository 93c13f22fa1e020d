// Package redisschema is what the Redis adapters agree on, defined once: a
// sale's key layout and the order message the claim script appends to a
// voucher's stream (the gate writes both, the stream consumer reads both).
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

// A buyers hash holds one field per place a user holds: the user id for the
// first, "<userId>:<n>" for the n-th (domain.Sale.LimitPerUser). Its value is
// the holding order's id, negated once that order is cancelled and its place
// forfeited: the place still counts toward the limit and names its order, so
// a heal can tell it is there. Older gates hold "0" for an unnamed forfeit.

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

// ParseMark reads a buyers-hash value: the order holding the place (held), or
// a forfeited place's order (0 for an unnamed one).
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

// Keys names the Redis keys of one voucher (or bucket). All but Live share its
// hash tag, so a script touching them runs on one cluster slot.
type Keys struct {
	Voucher string // hash: stock (remaining), begin and end (unix ms, [begin, end))
	Buyers  string // hash: PlaceField -> mark
	// Orders is the order stream the claim script appends to; it never
	// expires on its own: trimming and deleting it are the stream consumer's.
	Orders string
	Live   string // set of preheated voucher tags, outside every hash tag
	tag    string // <prefix>{<tag>}:
}

// KeysFor names an unsplit voucher's keys; prefix must pass ValidatePrefix.
func KeysFor(prefix string, id domain.VoucherID) Keys { return KeysForTag(prefix, VoucherTag(id)) }

// Staging names a temporary hash a gate Restore fills and RENAMEs into place.
func (k Keys) Staging(token string) string { return k.tag + "restore:" + token }

// Returned is the set of order ids whose units the gate was given back
// (StockGate.Return), so a heal never puts their marks back.
func (k Keys) Returned() string { return k.tag + "returned" }

// Room names one of the voucher's waiting-room keys: "" for its hash, or a
// part such as ":users".
func (k Keys) Room(part string) string { return k.tag + "room" + part }

// LiveSet is the set of preheated voucher tags (Keys.Live).
func LiveSet(prefix string) string { return prefix + "vouchers" }

// StreamRegistry is the stream consumer's set of voucher IDs whose streams
// may still hold unfinished entries.
func StreamRegistry(prefix string) string { return prefix + "streams" }

// DeadLetter is the default stream of order entries set aside for an operator.
func DeadLetter(prefix string) string { return prefix + "dead-letter" }

// ValidatePrefix refuses a brace: Redis Cluster hashes a key's first {...},
// which would then come from the prefix instead of the voucher's tag.
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
