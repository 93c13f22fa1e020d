package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

func TestOrderStateCancel(t *testing.T) {
	tests := []struct {
		name        string
		from        domain.OrderState
		want        domain.OrderState
		wantChanged bool
		wantErr     error
	}{
		{"cancel_created", domain.OrderCreated, domain.OrderCancelled, true, nil},
		{"cancel_cancelled_again", domain.OrderCancelled, domain.OrderCancelled, false, nil},
		{"cancel_refunding", domain.OrderRefunding, domain.OrderRefunding, false, nil},
		{"cancel_paid", domain.OrderPaid, domain.OrderPaid, false, domain.ErrAlreadyPaid},
		{"cancel_failed", domain.OrderFailed, domain.OrderFailed, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, changed, err := tt.from.AfterCancel()
			if next != tt.want || changed != tt.wantChanged || !errors.Is(err, tt.wantErr) {
				t.Fatalf("got (%s, %v, %v), want (%s, %v, %v)", next, changed, err, tt.want, tt.wantChanged, tt.wantErr)
			}
		})
	}
	if _, _, err := domain.OrderQueued.AfterCancel(); err == nil {
		t.Fatal("a queued order was cancelled without its row")
	}
}

func TestOrderStatusPlace(t *testing.T) {
	o, err := domain.NewVoucherOrder(1, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		state         domain.OrderState
		wantForfeited bool
	}{
		{domain.OrderCreated, false},
		{domain.OrderPaid, false},
		{domain.OrderCancelled, true},
		{domain.OrderRefunding, true},
	}
	for _, tt := range tests {
		t.Run(string(tt.state), func(t *testing.T) {
			p := domain.OrderStatus{Order: o, State: tt.state}.Place()
			if p.ID() != o.ID() || p.HoldsUnit() == tt.wantForfeited || (p.Mark() < 0) != tt.wantForfeited {
				t.Fatalf("place of a %s order = %v (holds its unit: %v, mark %d)", tt.state, p, p.HoldsUnit(), p.Mark())
			}
		})
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

func TestOrderStatusPayBy(t *testing.T) {
	deadline := time.Date(2026, 11, 29, 20, 15, 0, 0, time.UTC)
	for _, s := range []domain.OrderState{domain.OrderQueued, domain.OrderCreated, domain.OrderPaid, domain.OrderCancelled, domain.OrderRefunding, domain.OrderFailed} {
		st := domain.OrderStatus{State: s, Lifecycle: domain.Lifecycle{PayDeadline: deadline}}
		var want time.Time
		if s == domain.OrderCreated {
			want = deadline
		}
		if got := st.PayBy(); !got.Equal(want) {
			t.Errorf("%s: pay by %s, want %s", s, got, want)
		}
	}
	if got := (domain.OrderStatus{State: domain.OrderCreated}).PayBy(); !got.IsZero() {
		t.Errorf("created with no window: pay by %s, want none", got)
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

// TestPayment: a new transaction's kind and the state it leaves the order
// in, by the order's state; every kind but settled is owed back.
func TestPayment(t *testing.T) {
	tests := []struct {
		state    domain.OrderState
		want     domain.PaymentKind
		next     domain.OrderState
		wantOwed bool
		wantErr  bool
	}{
		{domain.OrderCreated, domain.PaymentSettled, domain.OrderPaid, false, false},
		{domain.OrderCancelled, domain.PaymentLate, domain.OrderRefunding, true, false},
		{domain.OrderPaid, domain.PaymentDouble, domain.OrderPaid, true, false},
		{domain.OrderRefunding, domain.PaymentDouble, domain.OrderRefunding, true, false},
		{domain.OrderFailed, domain.PaymentUnsold, domain.OrderFailed, true, false},
		{domain.OrderQueued, "", domain.OrderQueued, false, true},
	}
	for _, tt := range tests {
		t.Run(string(tt.state), func(t *testing.T) {
			got, next, err := tt.state.Pay()
			if (err != nil) != tt.wantErr || got != tt.want || next != tt.next || (err == nil && got.Owed() != tt.wantOwed) {
				t.Fatalf("%s.Pay() = %q, %s, %v; want %q, %s, owed=%v", tt.state, got, next, err, tt.want, tt.next, tt.wantOwed)
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
