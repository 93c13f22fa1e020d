package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

func TestOrderStateTransitions(t *testing.T) {
	tests := []struct {
		name        string
		from        domain.OrderState
		pay         bool // else cancel
		want        domain.OrderState
		wantChanged bool
		wantErr     error
	}{
		{"pay_created", domain.OrderCreated, true, domain.OrderPaid, true, nil},
		{"pay_paid_again", domain.OrderPaid, true, domain.OrderPaid, false, nil},
		{"pay_cancelled_refunds", domain.OrderCancelled, true, domain.OrderRefunding, true, nil},
		{"pay_refunding_again", domain.OrderRefunding, true, domain.OrderRefunding, false, nil},
		{"pay_failed", domain.OrderFailed, true, domain.OrderFailed, false, domain.ErrNotPayable},
		{"cancel_created", domain.OrderCreated, false, domain.OrderCancelled, true, nil},
		{"cancel_cancelled_again", domain.OrderCancelled, false, domain.OrderCancelled, false, nil},
		{"cancel_refunding", domain.OrderRefunding, false, domain.OrderRefunding, false, nil},
		{"cancel_paid", domain.OrderPaid, false, domain.OrderPaid, false, domain.ErrAlreadyPaid},
		{"cancel_failed", domain.OrderFailed, false, domain.OrderFailed, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, changed, err := tt.from.AfterCancel()
			if tt.pay {
				next, changed, err = tt.from.AfterPayment()
			}
			if next != tt.want || changed != tt.wantChanged || !errors.Is(err, tt.wantErr) {
				t.Fatalf("got (%s, %v, %v), want (%s, %v, %v)", next, changed, err, tt.want, tt.wantChanged, tt.wantErr)
			}
		})
	}
	if _, _, err := domain.OrderQueued.AfterCancel(); err == nil {
		t.Fatal("a queued order was cancelled without its row")
	}
}

func TestParseCancelReason(t *testing.T) {
	for _, s := range []string{"expired", "cancelled"} {
		if r, err := domain.ParseCancelReason(s); err != nil || string(r) != s {
			t.Fatalf("ParseCancelReason(%q) = %q, %v", s, r, err)
		}
	}
	for _, s := range []string{"", "Paid", "used", "refunded"} {
		if _, err := domain.ParseCancelReason(s); err == nil {
			t.Fatalf("ParseCancelReason(%q) accepted", s)
		}
	}
}

func TestPayDeadline(t *testing.T) {
	at := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	id, err := domain.NewOrderID(at, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := domain.PayDeadline(id, 15*time.Minute); !got.Equal(at.Add(15 * time.Minute)) {
		t.Fatalf("deadline = %s", got)
	}
	if got := domain.PayDeadline(id, 0); !got.IsZero() {
		t.Fatalf("window 0 gave deadline %s, want none", got)
	}
}

func TestCheckPayment(t *testing.T) {
	tests := []struct {
		name   string
		amount int64
		txn    string
		ok     bool
	}{
		{"exact_amount", 990, "tx-1", true},
		{"less", 989, "tx-1", false},
		{"more", 991, "tx-1", false},
		{"negative", -990, "tx-1", false},
		{"empty_transaction", 990, "", false},
		{"long_transaction", 990, string(make([]byte, domain.MaxTransactionID+1)), false},
		{"space_in_transaction", 990, "tx 1", false},
		{"non_ascii_transaction", 990, "tx-é", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := domain.CheckPayment(990, tt.amount, tt.txn)
			var ve *domain.ValidationError
			if tt.ok != (err == nil) || (err != nil && !errors.As(err, &ve)) {
				t.Fatalf("CheckPayment = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestPaymentKinds(t *testing.T) {
	tests := []struct {
		state    domain.OrderState
		want     domain.PaymentKind
		wantOwed bool
		wantErr  bool
	}{
		{domain.OrderCreated, domain.PaymentSettled, false, false},
		{domain.OrderCancelled, domain.PaymentLate, true, false},
		{domain.OrderPaid, domain.PaymentDouble, true, false},
		{domain.OrderRefunding, domain.PaymentDouble, true, false},
		{domain.OrderFailed, domain.PaymentUnsold, true, false},
		{domain.OrderQueued, "", false, true},
	}
	for _, tt := range tests {
		t.Run(string(tt.state), func(t *testing.T) {
			got, err := domain.PaymentKindOf(tt.state)
			if (err != nil) != tt.wantErr || got != tt.want || (err == nil && got.Owed() != tt.wantOwed) {
				t.Fatalf("PaymentKindOf(%s) = %q, %v; want %q owed=%v", tt.state, got, err, tt.want, tt.wantOwed)
			}
			if err == nil {
				if back, err := domain.ParsePaymentKind(string(got)); err != nil || back != got {
					t.Fatalf("ParsePaymentKind(%q) = %q, %v", got, back, err)
				}
			}
		})
	}
	if _, err := domain.ParsePaymentKind("refund"); err == nil {
		t.Fatal("ParsePaymentKind accepted an unknown kind")
	}
}
