package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
)

// The check's exit status and its words: orders only in flight pass with a
// line saying so; a lost order fails, with a hint when the queue is a channel.
func TestReconcileVerdict(t *testing.T) {
	order := func(id domain.OrderID, u domain.UserID) domain.VoucherOrder {
		o, err := domain.NewVoucherOrder(id, u, 7)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	base := application.Report{Voucher: 7, DBStock: 8, DBOrders: 2, GateFound: true, GateStock: 8, GateBuyers: 2}
	inFlight := base
	inFlight.GateStock, inFlight.GateBuyers, inFlight.Pending = 7, 3, 1
	inFlight.InFlight = []domain.VoucherOrder{order(11, 3)}
	lost := inFlight
	lost.InFlight, lost.Pending = nil, 0
	lost.NotInDB = []domain.VoucherOrder{order(11, 3)}
	channel := lost
	channel.Pending = -1

	tests := []struct {
		name    string
		r       application.Report
		wantErr bool
		want    []string
	}{
		{"consistent", base, false, []string{"voucher 7: consistent\n", "in flight (claimed, queued in the stream): 0"}},
		{"only_in_flight", inFlight, false, []string{"consistent but for orders in flight", "in flight (claimed, queued in the stream): 1 e.g. order 11 (user 3)", "only orders in flight differ (1)"}},
		{"lost_in_stream_mode", lost, true, []string{"DIFFERENT", "claimed in redis, not in mysql: 1"}},
		{"channel_mode_cannot_see_the_channel", channel, true, []string{"DIFFERENT", "pending: unknown", "cannot be seen from here"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			printReport(&out, "", tt.r)
			err := verdict(tt.r)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, errDifferences)) {
				t.Fatalf("verdict = %v, want error %v", err, tt.wantErr)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Fatalf("report lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
