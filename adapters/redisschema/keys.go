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
// first, "<userId>:<n>" for the n-th. Its value is the holding order's id,
// negated once the order is cancelled and its place forfeited (still counted
// toward the limit); older gates hold "0" for an unnamed forfeit.

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
	Orders  string // the claim script's order stream; only the stream consumer trims or deletes it
	Live    string // set of preheated voucher tags, outside every hash tag
	tag     string // <prefix>{<tag>}:
}

// KeysFor names an unsplit voucher's keys; prefix must pass ValidatePrefix.
func KeysFor(prefix string, id domain.VoucherID) Keys { return KeysForTag(prefix, VoucherTag(id)) }

// KeysForTag is the one place the per-voucher key layout is defined.
func KeysForTag(prefix, tag string) Keys {
	t := prefix + "{" + tag + "}:"
	return Keys{Voucher: t + "voucher", Buyers: t + "buyers", Orders: t + "orders", Live: LiveSet(prefix), tag: t}
}

// Staging names a temporary hash a gate Restore fills and RENAMEs into place.
func (k Keys) Staging(token string) string { return k.tag + "restore:" + token }

// Returned is the set of order ids whose units the gate was given back, so a heal never puts their marks back.
func (k Keys) Returned() string { return k.tag + "returned" }

// Room names one of the voucher's waiting-room keys: "" for its hash, or a part such as ":users".
func (k Keys) Room(part string) string { return k.tag + "room" + part }

// Transfers is a bucket's hash of outgoing transfer records: id -> "n:to:createdMs".
func (k Keys) Transfers() string { return k.tag + "xfer" }

// Applied is a bucket's set of the transfer ids it has received.
func (k Keys) Applied() string { return k.tag + "applied" }

// LiveSet is the set of preheated voucher tags (Keys.Live).
func LiveSet(prefix string) string { return prefix + "vouchers" }

// StreamRegistry is the stream consumer's set of voucher IDs whose streams may still hold unfinished entries.
func StreamRegistry(prefix string) string { return prefix + "streams" }

// DeadLetter is the default stream of order entries set aside for an operator.
func DeadLetter(prefix string) string { return prefix + "dead-letter" }

// BucketMeta names the string holding a split voucher's K; absent when unsplit.
func BucketMeta(prefix string, id domain.VoucherID) string {
	return prefix + "{" + VoucherTag(id) + "}:buckets"
}

// BucketLock names the per-voucher lock of a bucket restore.
func BucketLock(prefix string, id domain.VoucherID) string {
	return prefix + "{" + VoucherTag(id) + "}:buckets-restore"
}

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

// ControlsScript carries a sale's controls (end, pause, units added) to a voucher's or a bucket's hash.
var ControlsScript = redis.NewScript(controlsLua)

// A voucher split into K > 1 buckets keeps each bucket under its own hash tag
// "<voucherId>.<salt>"; the salt puts bucket b's slot in the b-th of K equal
// slot ranges, so on evenly sized masters the buckets land on different masters.

const clusterSlots = 16384

// VoucherTag is the hash tag of an unsplit voucher.
func VoucherTag(id domain.VoucherID) string { return strconv.FormatInt(int64(id), 10) }

// BucketTag is bucket b's (0 <= b < k) hash tag, a pure function of (id, b, k).
func BucketTag(id domain.VoucherID, b, k int) string {
	if k <= 1 {
		return VoucherTag(id)
	}
	lo, hi := b*clusterSlots/k, (b+1)*clusterSlots/k
	base := VoucherTag(id) + "."
	for salt := 0; ; salt++ {
		tag := base + strconv.Itoa(salt)
		if s := int(Slot(tag)); s >= lo && s < hi {
			return tag
		}
	}
}

// ParseTag reads a live-set or registry member: "<id>" or "<id>.<salt>".
func ParseTag(m string) (domain.VoucherID, bool) {
	head, salt, split := strings.Cut(m, ".")
	id, err := strconv.ParseInt(head, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != head {
		return 0, false
	}
	if split {
		n, err := strconv.Atoi(salt)
		if err != nil || n < 0 || strconv.Itoa(n) != salt {
			return 0, false
		}
	}
	return domain.VoucherID(id), true
}

// HomeBucket is the bucket that decides a user's claims: splitmix64's
// finaliser of the user id (so consecutive ids spread evenly) mod k.
func HomeBucket(u domain.UserID, k int) int {
	if k <= 1 {
		return 0
	}
	x := uint64(u)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(k))
}

// Slot is the Redis Cluster slot of a key or bare hash tag: CRC16 (XMODEM) of
// its first non-empty {...} section, mod 16384, table-driven (it is on hot paths).
func Slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[i]]
	}
	return crc % clusterSlots
}

var crc16Table = func() (t [256]uint16) {
	for b := range t {
		t[b] = crc16Bitwise(0, byte(b))
	}
	return t
}()

// crc16Bitwise feeds one byte into crc bit by bit (polynomial 0x1021).
func crc16Bitwise(crc uint16, b byte) uint16 {
	crc ^= uint16(b) << 8
	for range 8 {
		if crc&0x8000 != 0 {
			crc = crc<<1 ^ 0x1021
		} else {
			crc <<= 1
		}
	}
	return crc
}
