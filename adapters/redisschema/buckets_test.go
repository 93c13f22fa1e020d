package redisschema

import (
	"strings"
	"testing"

	"github.com/hmdp-go/seckill/domain"
)

func TestSlotMatchesRedis(t *testing.T) {
	// Values from CLUSTER KEYSLOT on a real server.
	for key, want := range map[string]uint16{"foo": 12182, "{user1000}.following": 3443, "123456789": 12739} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// FuzzSlotMatchesTheBitwiseCRC: the table gives what the polynomial's
// definition gives, for any key without a hash tag.
func FuzzSlotMatchesTheBitwiseCRC(f *testing.F) {
	for _, seed := range []string{"", "foo", "login:token:0123456789abcdef0123456789abcdef", "\xff\x00\x80"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if strings.ContainsRune(key, '{') {
			return
		}
		var crc uint16
		for i := 0; i < len(key); i++ {
			crc = crc16Bitwise(crc, key[i])
		}
		if got, want := Slot(key), crc%clusterSlots; got != want {
			t.Fatalf("Slot(%q) = %d, the bitwise CRC gives %d", key, got, want)
		}
	})
}

func TestBucketTagsFallInEvenRanges(t *testing.T) {
	for _, k := range []int{2, 3, 4, 16} {
		for id := domain.VoucherID(1); id < 200; id++ {
			for b := 0; b < k; b++ {
				tag := BucketTag(id, b, k)
				s := int(Slot(tag))
				if s < b*16384/k || s >= (b+1)*16384/k {
					t.Fatalf("k=%d id=%d b=%d: tag %q slot %d outside its range", k, id, b, tag, s)
				}
				if got, ok := ParseTag(tag); !ok || got != id {
					t.Fatalf("ParseTag(%q) = %d, %v", tag, got, ok)
				}
			}
		}
	}
	if BucketTag(7, 0, 1) != "7" {
		t.Fatal("K=1 must keep the voucher's own tag")
	}
}

func TestParseTagRefusesJunk(t *testing.T) {
	for _, m := range []string{"", "x", "0", "-1", "1.", "1.x", "01", "1.01", "1.2.3"} {
		if _, ok := ParseTag(m); ok {
			t.Errorf("ParseTag(%q) accepted", m)
		}
	}
}

func TestHomeBucketSpreads(t *testing.T) {
	const k, n = 3, 30000
	var c [k]int
	for u := 1; u <= n; u++ {
		c[HomeBucket(domain.UserID(u), k)]++
	}
	for b, x := range c {
		if x < n/k*9/10 || x > n/k*11/10 {
			t.Fatalf("bucket %d got %d of %d users: %v", b, x, n, c)
		}
	}
}
