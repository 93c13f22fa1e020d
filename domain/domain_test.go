package domain_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

var (
	t0 = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Hour)
)

func TestNewSale(t *testing.T) {
	tests := []struct {
		name      string
		stock     int
		begin     time.Time
		end       time.Time
		wantField string
	}{
		{name: "valid", stock: 100, begin: t0, end: t1},
		{name: "zero_stock", stock: 0, begin: t0, end: t1, wantField: "stock"},
		{name: "negative_stock", stock: -1, begin: t0, end: t1, wantField: "stock"},
		{name: "stock_too_large", stock: domain.MaxStock + 1, begin: t0, end: t1, wantField: "stock"},
		{name: "missing_begin", stock: 1, end: t1, wantField: "beginTime"},
		{name: "missing_end", stock: 1, begin: t0, wantField: "endTime"},
		{name: "end_equals_begin", stock: 1, begin: t0, end: t0, wantField: "endTime"},
		{name: "end_before_begin", stock: 1, begin: t1, end: t0, wantField: "endTime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := domain.NewSale(tt.stock, tt.begin, tt.end)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if s.Stock() != tt.stock || !s.Begin().Equal(tt.begin) || !s.End().Equal(tt.end) {
					t.Fatalf("sale = %+v", s)
				}
				return
			}
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.wantField {
				t.Fatalf("err = %v, want a ValidationError on %s", err, tt.wantField)
			}
		})
	}
}

func TestNewSaleAt(t *testing.T) {
	tests := []struct {
		name      string
		now       time.Time
		stock     int
		wantField string
	}{
		{name: "before_the_window", now: t0.Add(-time.Hour), stock: 1},
		{name: "inside_the_window", now: t0.Add(time.Minute), stock: 1},
		{name: "just_before_the_end", now: t1.Add(-time.Nanosecond), stock: 1},
		{name: "at_the_end", now: t1, stock: 1, wantField: "endTime"},
		{name: "after_the_end", now: t1.Add(time.Hour), stock: 1, wantField: "endTime"},
		{name: "sale_rules_still_apply", now: t0, stock: 0, wantField: "stock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := domain.NewSaleAt(tt.now, tt.stock, t0, t1)
			if tt.wantField == "" {
				if err != nil || s.Stock() != tt.stock || !s.End().Equal(t1) {
					t.Fatalf("NewSaleAt = %+v, %v", s, err)
				}
				return
			}
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.wantField {
				t.Fatalf("err = %v, want a ValidationError on %s", err, tt.wantField)
			}
		})
	}
}

func TestSaleCheck(t *testing.T) {
	s, err := domain.NewSale(10, t0, t1)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		paused    bool
		now       time.Time
		remaining int
		want      error
	}{
		{name: "before_begin", now: t0.Add(-time.Nanosecond), remaining: 10, want: domain.ErrNotStarted},
		{name: "at_begin", now: t0, remaining: 10},
		{name: "just_before_end", now: t1.Add(-time.Nanosecond), remaining: 1},
		{name: "at_end", now: t1, remaining: 10, want: domain.ErrEnded},
		{name: "sold_out", now: t0, remaining: 0, want: domain.ErrSoldOut},
		{name: "window_checked_before_stock", now: t1, remaining: 0, want: domain.ErrEnded},
		{name: "paused", paused: true, now: t0, remaining: 10, want: domain.ErrPaused},
		{name: "window_checked_before_pause", paused: true, now: t1, remaining: 10, want: domain.ErrEnded},
		{name: "pause_checked_before_stock", paused: true, now: t0, remaining: 0, want: domain.ErrPaused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.WithStoredControls(0, tt.paused).Check(tt.now, tt.remaining); !errors.Is(err, tt.want) {
				t.Fatalf("Check = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSaleWindow(t *testing.T) {
	s, err := domain.NewSale(10, t0, t1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name           string
		now            time.Time
		started, ended bool
	}{
		{"before_begin", t0.Add(-time.Nanosecond), false, false},
		{"at_begin", t0, true, false},
		{"just_before_end", t1.Add(-time.Nanosecond), true, false},
		{"at_end", t1, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if s.Started(tt.now) != tt.started || s.Ended(tt.now) != tt.ended {
				t.Fatalf("started %v, ended %v; want %v, %v", s.Started(tt.now), s.Ended(tt.now), tt.started, tt.ended)
			}
		})
	}
}

func TestSaleSameControls(t *testing.T) {
	s, err := domain.NewSale(10, t0, t1)
	if err != nil {
		t.Fatal(err)
	}
	added, err := s.AddStock(5, t0)
	if err != nil {
		t.Fatal(err)
	}
	moved, err := s.EndAt(t1.Add(time.Minute), t0)
	if err != nil {
		t.Fatal(err)
	}
	paused, err := s.WithPause(true, t0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    domain.Sale
		same bool
	}{
		{name: "itself", o: s, same: true},
		{name: "limit_is_no_control", o: s.WithStoredLimit(3), same: true},
		{name: "stock_added", o: added},
		{name: "end_moved", o: moved},
		{name: "paused", o: paused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.SameControls(tt.o); got != tt.same {
				t.Fatalf("SameControls = %v, want %v", got, tt.same)
			}
		})
	}
}

func TestSaleWithStoredWindow(t *testing.T) {
	r, err := domain.NewRoomRules(time.Minute, 10, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := domain.UnmarshalSplitSaleFromDatabase(10, t0, t1, 4).WithStoredRoom(r).WithStoredControls(3, true)
	got := s.WithStoredWindow(t0.Add(time.Second), t1.Add(time.Minute))
	if !got.Begin().Equal(t0.Add(time.Second)) || !got.End().Equal(t1.Add(time.Minute)) {
		t.Fatalf("window = [%s, %s)", got.Begin(), got.End())
	}
	if got.WithStoredWindow(t0, t1) != s {
		t.Fatalf("WithStoredWindow changed more than the window: %+v, want %+v", got, s)
	}
}

func TestNewSeckillVoucher(t *testing.T) {
	sale, _ := domain.NewSale(5, t0, t1)
	valid := domain.VoucherSpec{ShopID: 1, Title: "100 off", PayValue: 8000, ActualValue: 10000}
	long := make([]rune, 256)
	for i := range long {
		long[i] = '券'
	}
	tests := []struct {
		name      string
		mutate    func(*domain.VoucherSpec)
		sale      domain.Sale
		wantField string
	}{
		{name: "valid", mutate: func(*domain.VoucherSpec) {}, sale: sale},
		{name: "missing_shop", mutate: func(s *domain.VoucherSpec) { s.ShopID = 0 }, sale: sale, wantField: "shopId"},
		{name: "blank_title", mutate: func(s *domain.VoucherSpec) { s.Title = "  " }, sale: sale, wantField: "title"},
		{name: "title_too_long", mutate: func(s *domain.VoucherSpec) { s.Title = string(long) }, sale: sale, wantField: "title"},
		{name: "negative_pay_value", mutate: func(s *domain.VoucherSpec) { s.PayValue = -1 }, sale: sale, wantField: "payValue"},
		{name: "negative_actual_value", mutate: func(s *domain.VoucherSpec) { s.ActualValue = -1 }, sale: sale, wantField: "actualValue"},
		{name: "no_sale", mutate: func(*domain.VoucherSpec) {}, wantField: "sale"},
		{name: "nul_title", mutate: func(s *domain.VoucherSpec) { s.Title = "\x00" }, sale: sale, wantField: "title"},
		{name: "nul_inside_title", mutate: func(s *domain.VoucherSpec) { s.Title = "100\x00off" }, sale: sale, wantField: "title"},
		{name: "newline_in_sub_title", mutate: func(s *domain.VoucherSpec) { s.SubTitle = "a\nb" }, sale: sale, wantField: "subTitle"},
		{name: "escape_in_rules", mutate: func(s *domain.VoucherSpec) { s.Rules = "\x1b[31mred" }, sale: sale, wantField: "rules"},
		{name: "del_in_rules", mutate: func(s *domain.VoucherSpec) { s.Rules = "x\x7f" }, sale: sale, wantField: "rules"},
		{name: "tab_in_title", mutate: func(s *domain.VoucherSpec) { s.Title = "a\tb" }, sale: sale, wantField: "title"},
		{name: "cjk_and_emoji_pass", mutate: func(s *domain.VoucherSpec) {
			s.Title, s.Rules = "100元代金券 🎟", "全场通用，周一至周日"
		}, sale: sale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := valid
			tt.mutate(&spec)
			v, err := domain.NewSeckillVoucher(spec, tt.sale)
			if tt.wantField == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !v.IsSeckill() || v.Type() != domain.VoucherSeckill || v.ID() != 0 || v.Sale().Stock() != 5 {
					t.Fatalf("voucher = %+v", v)
				}
				return
			}
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.wantField {
				t.Fatalf("err = %v, want a ValidationError on %s", err, tt.wantField)
			}
		})
	}
}

func TestVoucherCheckGateable(t *testing.T) {
	sale, _ := domain.NewSale(5, t0, t1)
	unstored, _ := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "100 off"}, sale)
	for _, tt := range []struct {
		name    string
		v       domain.Voucher
		wantErr bool
	}{
		{"stored_seckill_voucher", unstored.WithID(7), false},
		{"not_stored_yet", unstored, true},
		{"normal_voucher", domain.UnmarshalVoucherFromDatabase(7, domain.VoucherSpec{ShopID: 1}, domain.VoucherNormal, 1, domain.Sale{}), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.v.CheckGateable(); (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tt.wantErr)
			}
		})
	}
}

func TestOrderIDLayout(t *testing.T) {
	tests := []struct {
		name    string
		at      time.Time
		seq     uint32
		wantErr bool
	}{
		{name: "epoch", at: domain.OrderEpoch, seq: 1},
		{name: "today_max_seq", at: t0, seq: ^uint32(0)},
		{name: "before_epoch", at: domain.OrderEpoch.Add(-time.Second), seq: 1, wantErr: true},
		{name: "past_31_bits", at: domain.OrderEpoch.Add(1 << 31 * time.Second), seq: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := domain.NewOrderID(tt.at, tt.seq)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("want an error, got id %d", id)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id <= 0 {
				t.Fatalf("id %d must be positive", id)
			}
			if !id.Time().Equal(tt.at.Truncate(time.Second)) || id.Seq() != tt.seq {
				t.Fatalf("id %d decodes to %s/%d, want %s/%d", id, id.Time(), id.Seq(), tt.at, tt.seq)
			}
		})
	}
	// The original's layout: the timestamp is the high part, so later
	// seconds always give larger IDs whatever the sequence.
	a, _ := domain.NewOrderID(t0, ^uint32(0))
	b, _ := domain.NewOrderID(t0.Add(time.Second), 0)
	if a >= b {
		t.Fatalf("id of a later second (%d) must exceed %d", b, a)
	}
}

func TestNewVoucherOrder(t *testing.T) {
	tests := []struct {
		name      string
		id        domain.OrderID
		user      domain.UserID
		voucher   domain.VoucherID
		wantField string
	}{
		{name: "valid", id: 1, user: 2, voucher: 3},
		{name: "zero_id", id: 0, user: 2, voucher: 3, wantField: "orderId"},
		{name: "negative_user", id: 1, user: -2, voucher: 3, wantField: "userId"},
		{name: "zero_voucher", id: 1, user: 2, voucher: 0, wantField: "voucherId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := domain.NewVoucherOrder(tt.id, tt.user, tt.voucher)
			if tt.wantField == "" {
				if err != nil || o.ID() != tt.id || o.UserID() != tt.user || o.VoucherID() != tt.voucher {
					t.Fatalf("got %v, %v", o, err)
				}
				return
			}
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.wantField {
				t.Fatalf("err = %v, want a ValidationError on %s", err, tt.wantField)
			}
		})
	}
}

func TestFailureReason(t *testing.T) {
	tests := []struct {
		in            string
		wantErr       bool
		releasesBuyer bool
		returnsStock  bool
	}{
		{in: "out_of_stock", releasesBuyer: true},
		{in: "duplicate", releasesBuyer: false},
		{in: "voucher_not_found", releasesBuyer: true},
		{in: "id_conflict", releasesBuyer: true, returnsStock: true},
		{in: "undeliverable", releasesBuyer: true, returnsStock: true},
		{in: "bogus", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run("reason_"+tt.in, func(t *testing.T) {
			r, err := domain.ParseFailureReason(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && (r.ReleasesBuyer() != tt.releasesBuyer || r.ReturnsStock() != tt.returnsStock) {
				t.Fatalf("ReleasesBuyer, ReturnsStock = %v, %v; want %v, %v", r.ReleasesBuyer(), r.ReturnsStock(), tt.releasesBuyer, tt.returnsStock)
			}
		})
	}
}

func TestOrderStatusRedelivery(t *testing.T) {
	o, _ := domain.NewVoucherOrder(1, 2, 3)
	other, _ := domain.NewVoucherOrder(1, 9, 3)
	tests := []struct {
		name       string
		recorded   domain.OrderStatus
		wantState  domain.OrderState
		wantReason domain.FailureReason
	}{
		{name: "created_stays_created", recorded: domain.OrderStatus{Order: o, State: domain.OrderCreated}, wantState: domain.OrderCreated},
		{name: "paid_was_created", recorded: domain.OrderStatus{Order: o, State: domain.OrderPaid}, wantState: domain.OrderCreated},
		{name: "cancelled_was_created", recorded: domain.OrderStatus{Order: o, State: domain.OrderCancelled, Lifecycle: domain.Lifecycle{CancelReason: domain.CancelExpired}},
			wantState: domain.OrderCreated},
		{name: "refunding_was_created", recorded: domain.OrderStatus{Order: o, State: domain.OrderRefunding}, wantState: domain.OrderCreated},
		{name: "failed_keeps_its_reason", recorded: domain.OrderStatus{Order: o, State: domain.OrderFailed, Reason: domain.FailOutOfStock},
			wantState: domain.OrderFailed, wantReason: domain.FailOutOfStock},
		{name: "id_of_another_order", recorded: domain.OrderStatus{Order: other, State: domain.OrderCreated},
			wantState: domain.OrderFailed, wantReason: domain.FailIDConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := tt.recorded.Redelivery(o)
			if out.Order != o || out.State != tt.wantState || out.Reason != tt.wantReason || out.New != (tt.wantReason == domain.FailIDConflict) {
				t.Fatalf("got %s/%s new %v, want %s/%s", out.State, out.Reason, out.New, tt.wantState, tt.wantReason)
			}
		})
	}
}

func TestBuyerMarks(t *testing.T) {
	a, _ := domain.NewVoucherOrder(1, 10, 3)
	b, _ := domain.NewVoucherOrder(2, 11, 3)
	a2, _ := domain.NewVoucherOrder(5, 10, 3)
	a3, _ := domain.NewVoucherOrder(6, 10, 3)
	elsewhere, _ := domain.NewVoucherOrder(3, 12, 4)
	tests := []struct {
		name    string
		limit   int
		orders  []domain.VoucherOrder
		want    map[domain.UserID][]domain.OrderID
		wantErr bool
	}{
		{name: "one_mark_per_user", limit: 1, orders: []domain.VoucherOrder{a, b}, want: map[domain.UserID][]domain.OrderID{10: {1}, 11: {2}}},
		{name: "same_order_twice_is_one_mark", limit: 1, orders: []domain.VoucherOrder{a, a}, want: map[domain.UserID][]domain.OrderID{10: {1}}},
		{name: "user_with_two_orders", limit: 1, orders: []domain.VoucherOrder{a, a2}, wantErr: true},
		{name: "two_orders_within_a_limit_of_two", limit: 2, orders: []domain.VoucherOrder{a, a2.Forfeited(), b}, want: map[domain.UserID][]domain.OrderID{10: {1, -5}, 11: {2}}},
		{name: "three_orders_past_a_limit_of_two", limit: 2, orders: []domain.VoucherOrder{a, a2, a3}, wantErr: true},
		{name: "order_of_another_voucher", limit: 1, orders: []domain.VoucherOrder{a, elsewhere}, wantErr: true},
		{name: "none", limit: 1, want: map[domain.UserID][]domain.OrderID{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := domain.UnmarshalVoucherFromDatabase(3, domain.VoucherSpec{}, domain.VoucherSeckill, 1, domain.Sale{}.WithStoredLimit(tt.limit))
			marks, err := domain.BuyerMarks(v, tt.orders)
			if (err != nil) != tt.wantErr || (err == nil && !reflect.DeepEqual(marks, tt.want)) {
				t.Fatalf("marks %v, err %v; want %v", marks, err, tt.want)
			}
		})
	}
}

func TestKeepQueued(t *testing.T) {
	a, _ := domain.NewVoucherOrder(1, 10, 3)
	b, _ := domain.NewVoucherOrder(2, 11, 3)
	a2, _ := domain.NewVoucherOrder(5, 10, 3)
	type marks = map[domain.UserID][]domain.OrderID
	tests := []struct {
		name      string
		limit     int
		marked    marks
		queued    []domain.VoucherOrder
		want      marks
		wantAdded int
	}{
		{name: "queued_buyer_keeps_the_place", limit: 1, marked: marks{11: {2}}, queued: []domain.VoucherOrder{a}, want: marks{10: {1}, 11: {2}}, wantAdded: 1},
		{name: "order_in_both_is_one_place", limit: 1, marked: marks{10: {1}}, queued: []domain.VoucherOrder{a}, want: marks{10: {1}}},
		{name: "forfeited_order_in_the_database", limit: 2, marked: marks{10: {-1}}, queued: []domain.VoucherOrder{a}, want: marks{10: {-1}}},
		{name: "past_the_limit_is_left_out", limit: 1, marked: marks{10: {1}}, queued: []domain.VoucherOrder{a2, b}, want: marks{10: {1}, 11: {2}}, wantAdded: 1},
		{name: "within_a_limit_of_two", limit: 2, marked: marks{10: {1}}, queued: []domain.VoucherOrder{a2}, want: marks{10: {1, 5}}, wantAdded: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if added := domain.KeepQueued(tt.marked, domain.Sale{}.WithStoredLimit(tt.limit), tt.queued); added != tt.wantAdded || !reflect.DeepEqual(tt.marked, tt.want) {
				t.Fatalf("added %d, marks %v; want %d, %v", added, tt.marked, tt.wantAdded, tt.want)
			}
		})
	}
}

func TestSaleLimitPerUser(t *testing.T) {
	now := time.Now()
	sale, err := domain.NewSale(10, now.Add(time.Hour), now.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if sale.LimitPerUser() != 1 {
		t.Fatalf("a new sale allows %d orders per user, want 1", sale.LimitPerUser())
	}
	for _, n := range []int{0, -1, domain.MaxLimitPerUser + 1} {
		if _, err := sale.WithLimitPerUser(n); !isInvalid(err) {
			t.Fatalf("limit %d: err %v, want invalid input", n, err)
		}
	}
	three, err := sale.WithLimitPerUser(3)
	if err != nil || three.LimitPerUser() != 3 {
		t.Fatalf("limit 3: %d, %v", three.LimitPerUser(), err)
	}
	if one, _ := three.WithLimitPerUser(1); one != sale {
		t.Fatal("a limit of one is the default sale, whichever way it was made")
	}
	rules, err := domain.NewRoomRules(domain.MinRoomOpensBefore, 10, domain.MinRoomPassTTL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := three.WithRoom(now, rules); !isInvalid(err) {
		t.Fatalf("a room on a sale of 3 per user: %v, want invalid input", err)
	}
	roomed, err := sale.WithRoom(now, rules)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := roomed.WithLimitPerUser(2); !isInvalid(err) {
		t.Fatalf("3 per user on a sale with a room: %v, want invalid input", err)
	}
}

func TestSaleWithBuckets(t *testing.T) {
	now := time.Now()
	sale, err := domain.NewSale(10, now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if sale.Buckets() != 1 {
		t.Fatalf("a new sale has %d buckets, want 1", sale.Buckets())
	}
	for _, tc := range []struct {
		name string
		k    int
		ok   bool
	}{
		{"one_is_unsplit", 1, true},
		{"three", 3, true},
		{"as_many_as_the_stock", 10, true},
		{"zero", 0, false},
		{"negative", -1, false},
		{"more_than_max", domain.MaxBuckets + 1, false},
		{"more_than_the_stock", 11, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sale.WithBuckets(tc.k)
			if !tc.ok {
				var ve *domain.ValidationError
				if !errors.As(err, &ve) || ve.Field != "buckets" {
					t.Fatalf("WithBuckets(%d) = %v, want a validation error on buckets", tc.k, err)
				}
				return
			}
			if err != nil || got.Buckets() != tc.k || got.Stock() != 10 {
				t.Fatalf("WithBuckets(%d) = %d buckets, %v", tc.k, got.Buckets(), err)
			}
		})
	}
	if one, _ := sale.WithBuckets(1); one != sale {
		t.Fatal("an unsplit sale must compare equal however it was made")
	}
}

func isInvalid(err error) bool {
	var v *domain.ValidationError
	return errors.As(err, &v)
}
