package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

func TestNewRoomRules(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opens, ttl time.Duration
		rate, marg int
		field      string // "" = valid
	}{
		{"valid", 30 * time.Second, time.Minute, 50, 10, ""},
		{"valid_bounds", time.Second, 5 * time.Second, 1, 0, ""},
		{"valid_upper_bounds", 24 * time.Hour, 10 * time.Minute, domain.MaxRoomAdmitRate, domain.MaxStock, ""},
		{"opens_zero", 0, time.Minute, 50, 0, "waitingRoom.opensBeforeSeconds"},
		{"opens_too_long", 25 * time.Hour, time.Minute, 50, 0, "waitingRoom.opensBeforeSeconds"},
		{"opens_fraction", 1500 * time.Millisecond, time.Minute, 50, 0, "waitingRoom.opensBeforeSeconds"},
		{"rate_zero", time.Minute, time.Minute, 0, 0, "waitingRoom.admitPerSecond"},
		{"rate_negative", time.Minute, time.Minute, -1, 0, "waitingRoom.admitPerSecond"},
		{"rate_too_high", time.Minute, time.Minute, domain.MaxRoomAdmitRate + 1, 0, "waitingRoom.admitPerSecond"},
		{"ttl_too_short", time.Minute, 4 * time.Second, 50, 0, "waitingRoom.passTtlSeconds"},
		{"ttl_too_long", time.Minute, 11 * time.Minute, 50, 0, "waitingRoom.passTtlSeconds"},
		{"margin_negative", time.Minute, time.Minute, 50, -1, "waitingRoom.margin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := domain.NewRoomRules(tc.opens, tc.rate, tc.ttl, tc.marg)
			if tc.field == "" {
				if err != nil || r.IsZero() {
					t.Fatalf("got %v, %v; want valid rules", r, err)
				}
				return
			}
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("got %v; want a validation error on %s", err, tc.field)
			}
		})
	}
}

func TestSaleWithRoom(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	rules, err := domain.NewRoomRules(30*time.Second, 10, time.Minute, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		begin time.Duration // after now
		ok    bool
	}{
		{"begins_after_the_lead", domain.RoomLead, true},
		{"begins_within_the_lead", domain.RoomLead - time.Millisecond, false},
		{"already_begun", -time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := domain.NewSale(10, now.Add(tc.begin), now.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			s, err = s.WithRoom(now, rules)
			if (err == nil) != tc.ok {
				t.Fatalf("WithRoom = %v; want ok=%v", err, tc.ok)
			}
			if tc.ok && (!s.HasRoom() || s.Room() != rules || !s.Room().Opens(s.Begin()).Equal(now.Add(tc.begin-30*time.Second))) {
				t.Fatalf("sale %+v does not hold the room", s)
			}
		})
	}
}

func TestInDraw(t *testing.T) {
	begin := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		at     time.Duration
		inDraw bool
	}{
		{"before_opening", -31 * time.Second, true},
		{"at_opening", -30 * time.Second, true},
		{"just_before_begin", -time.Millisecond, true},
		{"same_millisecond_as_begin", 999 * time.Microsecond, true},
		{"after_begin", time.Millisecond, false},
		{"at_end", time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := domain.InDraw(begin, begin.Add(tc.at)); got != tc.inDraw {
				t.Errorf("InDraw = %v; want %v", got, tc.inDraw)
			}
		})
	}
}

func TestAdmitTarget(t *testing.T) {
	r, _ := domain.NewRoomRules(time.Minute, 40, time.Minute, 0)
	for _, tc := range []struct {
		elapsed time.Duration
		want    int64
	}{{-time.Second, 0}, {0, 0}, {24 * time.Millisecond, 0}, {25 * time.Millisecond, 1}, {time.Second, 40}, {90 * time.Second, 3600}} {
		if got := r.AdmitTarget(tc.elapsed); got != tc.want {
			t.Errorf("AdmitTarget(%s) = %d; want %d", tc.elapsed, got, tc.want)
		}
	}
}

// The draw is a permutation of [0, n) for every n (cycle walking lands every
// place in range, no two joiners share one), leaves later joiners in FIFO
// order, and depends on the seed.
func TestDrawIsAPermutation(t *testing.T) {
	var seed [domain.RoomSeedSize]byte
	seed[0] = 7
	for _, n := range []int64{0, 1, 2, 3, 5, 16, 17, 100, 1000, 4097} {
		d := domain.NewDraw(seed, n)
		seen := make([]bool, n)
		for j := int64(0); j < n; j++ {
			p := d.Place(j)
			if p < 0 || p >= n || seen[p] {
				t.Fatalf("n=%d: place of %d is %d (out of range or taken)", n, j, p)
			}
			seen[p] = true
		}
		for j := n; j < n+5; j++ {
			if p := d.Place(j); p != j {
				t.Fatalf("n=%d: late joiner %d placed at %d; want FIFO", n, j, p)
			}
		}
	}
	other := seed
	other[0] = 8
	a, b := domain.NewDraw(seed, 1000), domain.NewDraw(other, 1000)
	same := 0
	for j := int64(0); j < 1000; j++ {
		if a.Place(j) == b.Place(j) {
			same++
		}
	}
	if same > 20 { // a random pair of permutations agrees on about 1 place
		t.Fatalf("two seeds agree on %d of 1000 places", same)
	}
}
