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
	stockAlone := base
	stockAlone.GateStock = 9
	forgot := base
	forgot.GateStock, forgot.GateBuyers, forgot.Forgotten = 9, 1, 1
	forgot.NotInGate = []domain.VoucherOrder{order(10, 1)}
	absent := base
	absent.GateFound, absent.GateStock, absent.GateBuyers = false, 0, 0

	tests := []struct {
		name    string
		r       application.Report
		wantErr bool
		want    []string
		wantNot []string
	}{
		{"consistent", base, false, []string{"voucher 7: consistent\n", "in flight (claimed, queued in the stream): 0"}, []string{"stock differs", "cannot be recovered"}},
		{"only_in_flight", inFlight, false, []string{"consistent but for orders in flight", "in flight (claimed, queued in the stream): 1 e.g. order 11 (user 3)", "only orders in flight differ (1)"}, []string{"stock differs"}},
		{"lost_in_stream_mode", lost, true, []string{"DIFFERENT", "claimed in redis, not in mysql: 1"}, []string{"stock differs", "cannot be recovered"}},
		{"channel_mode_cannot_see_the_channel", channel, true, []string{"DIFFERENT", "pending: unknown", "cannot be seen from here"}, []string{"stock differs"}},
		// The reported bug: DIFFERENT while every difference counter read 0.
		{"stock_alone_differs", stockAlone, true, []string{"DIFFERENT", "stock difference (redis - mysql): 1", "the stock differs by 1 units more than the orders above account for"}, nil},
		{"redis_forgot_committed_orders", forgot, true, []string{"DIFFERENT", "in mysql, not in redis:         1", "of which redis forgot (no mark for the user): 1",
			"redis forgot 1 committed orders", "cannot be recovered, only prevented"}, []string{"stock differs"}},
		{"gate_absent", absent, true, []string{"DIFFERENT", "redis:   absent", "redis holds no gate", "cannot be recovered, only prevented"}, []string{"stock difference"}},
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
			for _, w := range tt.wantNot {
				if strings.Contains(out.String(), w) {
					t.Fatalf("report says %q:\n%s", w, out.String())
				}
			}
		})
	}
}
