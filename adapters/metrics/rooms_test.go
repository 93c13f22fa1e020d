package metrics_test

import (
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/application"
)

// The rooms' series are what the instance's view says, one set per live room.
func TestRoomGauges(t *testing.T) {
	m := metrics.New()
	m.Rooms(func(now time.Time) []application.RoomFigures {
		return []application.RoomFigures{{Voucher: 7, Joined: 10, Admitted: 4, Waiting: 6, Used: 3, Lapsed: 1, Drawn: true, ReadAt: now}}
	})
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"seckill_room_waiting": 6, "seckill_room_admitted": 4, "seckill_room_passes_used": 3, "seckill_room_passes_expired": 1,
	}
	for _, mf := range mfs {
		w, ok := want[mf.GetName()]
		if !ok {
			continue
		}
		delete(want, mf.GetName())
		ms := mf.GetMetric()
		if len(ms) != 1 || ms[0].GetLabel()[0].GetValue() != "7" {
			t.Fatalf("%s: %v", mf.GetName(), ms)
		}
		got := ms[0].GetGauge().GetValue() + ms[0].GetCounter().GetValue()
		if got != w {
			t.Errorf("%s = %v; want %v", mf.GetName(), got, w)
		}
	}
	if len(want) != 0 {
		t.Fatalf("missing series: %v", want)
	}
}
