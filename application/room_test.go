package application_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

var roomKey = []byte("0123456789abcdef0123456789abcdef")

// roomWorld is one instance's waiting rooms on the memory fakes.
type roomWorld struct {
	clock *testenv.Clock
	rooms *memory.Rooms
	gate  *memory.Gate
	dir   *application.RoomDirectory
	room  *application.WaitingRoom
	add   *application.AddSeckillVoucher
	board *application.SaleDashboard
}

func newRoomWorld(t testing.TB, at time.Time) *roomWorld {
	t.Helper()
	w := &roomWorld{clock: testenv.NewClock(at)}
	w.gate = memory.NewGate(w.clock)
	w.rooms = memory.NewRooms(w.gate)
	w.dir = application.NewRoomDirectory(w.rooms, w.clock)
	w.room = application.NewWaitingRoom(w.dir, application.NewRoomSigner(roomKey))
	vouchers := memory.NewVouchers()
	orders := memory.NewOrders(vouchers)
	w.add = application.NewAddSeckillVoucher(vouchers, orders, application.NewRoomGate(w.gate, w.dir))
	w.board = application.NewSaleDashboard(vouchers, w.gate, orders, chanqueue.New(1, 0), metrics.NewClaimCounter(), w.dir, w.clock)
	return w
}

// roomPass is a claim's pass as the tests hand it over.
type roomPass string

func (p roomPass) RoomPass() string { return string(p) }

// sale creates a voucher beginning at begin with the room rules (zero: none).
func (w *roomWorld) sale(t testing.TB, stock int, begin time.Time, r domain.RoomRules) domain.VoucherID {
	t.Helper()
	s, err := domain.NewSale(stock, begin, begin.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if s, err = s.WithRoom(w.clock.Now(), r); err != nil {
		t.Fatal(err)
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 1, Title: "t"}, s)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := w.add.Handle(context.Background(), testAdmin, v)
	if err != nil {
		t.Fatal(err)
	}
	return saved.ID()
}

// buyWithPass is a claim with the user's pass that takes a unit (order 1)
// and records the pass used, as the service does; it returns the order.
func (w *roomWorld) buyWithPass(t testing.TB, id domain.VoucherID, user domain.UserID, pass string) domain.VoucherOrder {
	t.Helper()
	ctx := context.Background()
	p, err := w.room.Check(ctx, id, user, roomPass(pass))
	if err != nil {
		t.Fatal(err)
	}
	sold := testenv.Order(t, 1, user, id)
	if err := w.gate.Reserve(ctx, sold); err != nil {
		t.Fatal(err)
	}
	if err := w.room.Used(ctx, id, user, p); err != nil {
		t.Fatal(err)
	}
	return sold
}

func rules(t testing.TB, opens time.Duration, rate int, ttl time.Duration, margin int) domain.RoomRules {
	t.Helper()
	r, err := domain.NewRoomRules(opens, rate, ttl, margin)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestJoinRoomRefusals(t *testing.T) {
	ctx := context.Background()
	begin := now.Add(time.Minute)
	for _, tc := range []struct {
		name string
		at   time.Time
		room bool
		want error
	}{
		{"before_the_room_opens", begin.Add(-31 * time.Second), true, domain.ErrRoomNotOpen},
		{"at_opening", begin.Add(-30 * time.Second), true, nil},
		{"after_the_begin", begin.Add(time.Second), true, nil},
		{"at_the_end", begin.Add(time.Hour), true, domain.ErrEnded},
		{"a_sale_without_room", begin, false, domain.ErrNoRoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newRoomWorld(t, now)
			var r domain.RoomRules
			if tc.room {
				r = rules(t, 30*time.Second, 10, time.Minute, 0)
			}
			id := w.sale(t, 10, begin, r)
			w.clock.Set(tc.at)
			st, err := w.room.Join(ctx, id, 1)
			if !errors.Is(err, tc.want) {
				t.Fatalf("join = %+v, %v; want %v", st, err, tc.want)
			}
			if err == nil && st.Ticket == "" {
				t.Fatal("a join answered no ticket")
			}
		})
	}
	w := newRoomWorld(t, now)
	if _, err := w.room.Join(ctx, 404, 1); !errors.Is(err, domain.ErrNoRoom) {
		t.Fatalf("join of an unknown voucher = %v; want no_room", err)
	}
}

func TestJoinAgainKeepsThePlace(t *testing.T) {
	ctx := context.Background()
	w := newRoomWorld(t, now)
	id := w.sale(t, 10, now.Add(time.Minute), rules(t, time.Minute, 10, time.Minute, 0))
	a, err := w.room.Join(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.room.Join(ctx, id, 2); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(application.RoomRefresh) // the view is refreshed at most once per interval
	again, err := w.room.Join(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if again.Ticket != a.Ticket {
		t.Fatalf("joining again gave another ticket: %q, then %q", a.Ticket, again.Ticket)
	}
	if again.Joined != 2 || again.Phase != application.RoomDrawPending {
		t.Fatalf("status %+v; want 2 joined, pre_queue", again)
	}
}

func TestPollRoomTickets(t *testing.T) {
	ctx := context.Background()
	w := newRoomWorld(t, now)
	id := w.sale(t, 10, now.Add(time.Minute), rules(t, time.Minute, 10, time.Minute, 0))
	other := w.sale(t, 10, now.Add(time.Minute), rules(t, time.Minute, 10, time.Minute, 0))
	mine, err := w.room.Join(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	forged := application.NewRoomSigner([]byte("another key, of another service!")).
		Ticket(id, 1, 0)
	for _, tc := range []struct {
		name    string
		voucher domain.VoucherID
		user    domain.UserID
		ticket  string
		want    error
	}{
		{"own_ticket", id, 1, mine.Ticket, nil},
		{"no_ticket", id, 1, "", domain.ErrNotInRoom},
		{"garbage", id, 1, "not a ticket", domain.ErrNotInRoom},
		{"another_users_ticket", id, 2, mine.Ticket, domain.ErrNotInRoom},
		{"another_sales_ticket", other, 1, mine.Ticket, domain.ErrNotInRoom},
		{"signed_with_another_key", id, 1, forged, domain.ErrNotInRoom},
		{"truncated", id, 1, mine.Ticket[:len(mine.Ticket)-1], domain.ErrNotInRoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := w.room.Poll(ctx, tc.voucher, tc.user, tc.ticket); !errors.Is(err, tc.want) {
				t.Fatalf("poll = %v; want %v", err, tc.want)
			}
		})
	}
}

// admitted polls until user's pass is issued or the clock passes until.
func (w *roomWorld) pollAll(t testing.TB, id domain.VoucherID, tickets map[domain.UserID]string) map[domain.UserID]application.RoomStatus {
	t.Helper()
	out := make(map[domain.UserID]application.RoomStatus, len(tickets))
	for u, tk := range tickets {
		st, err := w.room.Poll(context.Background(), id, u, tk)
		if err != nil {
			t.Fatal(err)
		}
		out[u] = st
	}
	return out
}

func TestRoomAdmitsAtTheRateAndChecksPasses(t *testing.T) {
	ctx := context.Background()
	begin := now.Add(time.Minute)
	w := newRoomWorld(t, now)
	id := w.sale(t, 100, begin, rules(t, time.Minute, 4, 10*time.Second, 0))
	plain := w.sale(t, 100, begin, domain.RoomRules{})
	tickets := make(map[domain.UserID]string)
	for u := domain.UserID(1); u <= 8; u++ {
		st, err := w.room.Join(ctx, id, u)
		if err != nil {
			t.Fatal(err)
		}
		tickets[u] = st.Ticket
	}
	// At the begin (in the draw's last millisecond) nobody is admitted.
	w.clock.Set(begin)
	for u, st := range w.pollAll(t, id, tickets) {
		if st.Phase != application.RoomDrawPending {
			t.Fatalf("user %d at the begin: %+v; want pre_queue", u, st)
		}
	}
	// Half a second later the rate (4/s) admits 2; the others wait, told
	// how many are ahead.
	w.clock.Set(begin.Add(500 * time.Millisecond))
	sts := w.pollAll(t, id, tickets)
	var admitted []domain.UserID
	positions := make(map[int64]bool)
	for u, st := range sts {
		positions[st.Position] = true
		switch st.Phase {
		case application.RoomAdmitted:
			admitted = append(admitted, u)
			// Valid for the TTL (10 s) less a second of clock skew, so no
			// instance takes it once the room has let its place lapse.
			if st.Pass == "" || !st.PassExpires.Equal(begin.Add(500*time.Millisecond+9*time.Second)) {
				t.Fatalf("admitted user %d: %+v", u, st)
			}
		case application.RoomWaiting:
			if st.Ahead != st.Position-1-2 || st.Wait != time.Duration(st.Ahead+1)*time.Second/4 {
				t.Fatalf("waiting user %d: %+v", u, st)
			}
		default:
			t.Fatalf("user %d: %+v", u, st)
		}
	}
	if len(admitted) != 2 || len(positions) != 8 {
		t.Fatalf("admitted %v, %d distinct positions; want 2 admitted of 8 distinct", admitted, len(positions))
	}
	u := admitted[0]
	pass := sts[u].Pass
	var waiting domain.UserID
	for v, st := range sts {
		if st.Phase == application.RoomWaiting {
			waiting = v
		}
	}
	for _, tc := range []struct {
		name    string
		voucher domain.VoucherID
		user    domain.UserID
		pass    string
		at      time.Duration // after the begin
		want    error
	}{
		{"own_pass", id, u, pass, time.Second, nil},
		{"no_pass", id, u, "", time.Second, domain.ErrPassRequired},
		{"a_ticket_is_no_pass", id, u, tickets[u], time.Second, domain.ErrPassRequired},
		{"another_users_pass", id, waiting, pass, time.Second, domain.ErrPassRequired},
		{"expired_pass", id, u, pass, 10500 * time.Millisecond, domain.ErrPassExpired},
		{"sale_without_room_needs_none", plain, u, "", time.Second, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w.clock.Set(begin.Add(tc.at))
			if _, err := w.room.Check(ctx, tc.voucher, tc.user, roomPass(tc.pass)); !errors.Is(err, tc.want) {
				t.Fatalf("check = %v; want %v", err, tc.want)
			}
		})
	}
}

// Polls between two refreshes cost the store nothing; one read per
// RoomRefresh serves every poll of the instance.
func TestPollAnswersFromMemory(t *testing.T) {
	ctx := context.Background()
	begin := now.Add(time.Minute)
	w := newRoomWorld(t, now)
	id := w.sale(t, 100, begin, rules(t, time.Minute, 4, 10*time.Second, 0))
	st, err := w.room.Join(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	before := w.rooms.Calls()
	for i := 0; i < 1000; i++ {
		if _, err := w.room.Poll(ctx, id, 1, st.Ticket); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.rooms.Calls() - before; got != 0 {
		t.Fatalf("1000 polls within one refresh cost %d store calls; want 0", got)
	}
	w.clock.Advance(application.RoomRefresh)
	for i := 0; i < 1000; i++ {
		if _, err := w.room.Poll(ctx, id, 1, st.Ticket); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.rooms.Calls() - before; got != 1 {
		t.Fatalf("1000 polls after a refresh interval cost %d store calls; want 1", got)
	}
	// The pass check of a sale without a room costs the instance that
	// created it nothing, and another instance one look, then nothing: the
	// sale's gate exists without a room, so it has none for good.
	plain := w.sale(t, 100, begin, domain.RoomRules{})
	w.clock.Set(begin.Add(time.Second))
	other := application.NewWaitingRoom(application.NewRoomDirectory(w.rooms, w.clock), application.NewRoomSigner(roomKey))
	for _, tc := range []struct {
		name string
		room *application.WaitingRoom
		want int64
	}{{"creating_instance", w.room, 0}, {"another_instance", other, 1}} {
		before = w.rooms.Calls()
		for i := 0; i < 1000; i++ {
			if _, err := tc.room.Check(ctx, plain, 1, roomPass("")); err != nil {
				t.Fatal(err)
			}
			w.clock.Advance(time.Second)
		}
		if got := w.rooms.Calls() - before; got != tc.want {
			t.Fatalf("%s: 1000 claims of a sale without a room over 1000 s cost %d store calls; want %d", tc.name, got, tc.want)
		}
	}
}

// No more passes are outstanding than what is left to sell, so each is
// worth a unit (margin no longer oversubscribes): a used pass's unit is gone
// with it, an unused one lapses and its unit admits the next in line, and a
// unit returned to the sale (an expired or cancelled order) goes to the line.
func TestRoomCapsOutstandingPasses(t *testing.T) {
	ctx := context.Background()
	begin := now.Add(time.Minute)
	w := newRoomWorld(t, now)
	id := w.sale(t, 2, begin, rules(t, time.Minute, 1000, 10*time.Second, 1))
	tickets := make(map[domain.UserID]string)
	for u := domain.UserID(1); u <= 10; u++ {
		st, err := w.room.Join(ctx, id, u)
		if err != nil {
			t.Fatal(err)
		}
		tickets[u] = st.Ticket
	}
	count := func() (admitted []domain.UserID, passes map[domain.UserID]string) {
		passes = make(map[domain.UserID]string)
		for u, st := range w.pollAll(t, id, tickets) {
			if st.Phase == application.RoomAdmitted {
				admitted = append(admitted, u)
				passes[u] = st.Pass
			}
		}
		return admitted, passes
	}
	w.clock.Set(begin.Add(time.Second))
	adm, passes := count()
	if len(adm) != 2 {
		t.Fatalf("admitted %v; want the stock, 2 (the margin oversubscribes no more)", adm)
	}
	// One claims with its pass: its unit is gone, and nobody new is
	// admitted (the other pass holds the last unit).
	buyer := adm[0]
	sold := w.buyWithPass(t, id, buyer, passes[buyer])
	w.clock.Advance(application.RoomRefresh)
	if adm, _ = count(); len(adm) != 2 {
		t.Fatalf("after one pass was used: admitted %v; want the same 2 (one unit left, held by the other pass)", adm)
	}
	// The other never claims: once its pass lapses its unit admits the
	// next in line, one.
	w.clock.Advance(10 * time.Second)
	if adm, _ = count(); len(adm) != 1 {
		t.Fatalf("after the passes expired: admitted %v; want 1: the lapsed place's unit", adm)
	}
	for u, st := range w.pollAll(t, id, tickets) {
		if st.Phase == application.RoomAdmitted && st.Position <= 2 {
			t.Fatalf("user %d at position %d is still admitted after its pass expired", u, st.Position)
		}
	}
	// The sold order expires and its unit comes back: it goes to the line.
	if err := w.gate.Return(ctx, []domain.VoucherOrder{sold}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(application.RoomRefresh)
	if adm, _ = count(); len(adm) != 2 {
		t.Fatalf("after a unit was returned: admitted %v; want 2: the returned unit goes to the next in line", adm)
	}
}

// A pass admits one order. Where the shop lets a buyer claim again after a
// cancel (SECKILL_RECLAIM_AFTER_CANCEL), the gate frees the buyer, but the
// pass that bought the cancelled order is spent: its unit went back to the
// line, not to the canceller clicking again (the loop: one pass
// claimed three times).
func TestAPassAdmitsOneOrderEvenWhereACancelFreesTheBuyer(t *testing.T) {
	ctx := context.Background()
	begin := now.Add(time.Minute)
	w := newRoomWorld(t, now)
	w.gate.WithReclaimAfterCancel(true)
	id := w.sale(t, 5, begin, rules(t, time.Minute, 1000, time.Minute, 0))
	st, err := w.room.Join(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	w.clock.Set(begin.Add(time.Second))
	me := w.pollAll(t, id, map[domain.UserID]string{1: st.Ticket})[1]
	if me.Phase != application.RoomAdmitted {
		t.Fatalf("the only joiner: %+v; want admitted", me)
	}
	sold := w.buyWithPass(t, id, 1, me.Pass)
	if err := w.gate.Return(ctx, []domain.VoucherOrder{sold}); err != nil {
		t.Fatal(err)
	}
	// The gate itself would take the buyer again now...
	again := testenv.Order(t, 2, 1, id)
	if err := w.gate.Reserve(ctx, again); err != nil {
		t.Fatalf("the gate after a cancel in reclaim mode: %v; want the buyer freed (the test's premise)", err)
	}
	if err := w.gate.Release(ctx, again, true); err != nil {
		t.Fatal(err)
	}
	// ...but not through the pass that was used.
	if _, err := w.room.Check(ctx, id, 1, roomPass(me.Pass)); !errors.Is(err, domain.ErrAlreadyClaimed) {
		t.Fatalf("the used pass after its order was cancelled: %v; want duplicate", err)
	}
}

// An instance that looked at a sale before it existed learns of its room
// within a second, well before its begin (domain.RoomLead): no claim slips
// through without a pass.
func TestAnotherInstanceLearnsOfANewRoom(t *testing.T) {
	ctx := context.Background()
	w := newRoomWorld(t, now)
	other := application.NewWaitingRoom(application.NewRoomDirectory(w.rooms, w.clock), application.NewRoomSigner(roomKey))
	noPass := roomPass("")
	const next = domain.VoucherID(1) // the id the memory repository gives first
	if _, err := other.Check(ctx, next, 1, noPass); err != nil {
		t.Fatalf("a sale that does not exist yet: %v", err)
	}
	begin := now.Add(domain.RoomLead)
	if id := w.sale(t, 10, begin, rules(t, time.Second, 10, time.Minute, 0)); id != next {
		t.Fatalf("the sale got id %d; the test expects %d", id, next)
	}
	w.clock.Advance(time.Second)
	if _, err := other.Check(ctx, next, 1, noPass); !errors.Is(err, domain.ErrPassRequired) {
		t.Fatalf("a second after the room was opened, another instance: %v; want pass_required", err)
	}
	if !w.clock.Now().Before(begin) {
		t.Fatal("the test must check before the begin")
	}
}

// The live sale page shows a sale's room as the store has it, read by the
// board itself (an instance that serves no poll of that room still shows
// it): places given, then admitted at the rate after the draw, and passes
// used; a sale without a room shows none.
func TestSaleBoardShowsTheWaitingRoom(t *testing.T) {
	ctx := context.Background()
	begin := now.Add(time.Minute)
	w := newRoomWorld(t, now)
	id := w.sale(t, 100, begin, rules(t, time.Minute, 4, 10*time.Second, 0))
	plain := w.sale(t, 100, begin, domain.RoomRules{})
	tickets := make(map[domain.UserID]string)
	for u := domain.UserID(1); u <= 6; u++ {
		st, err := w.room.Join(ctx, id, u)
		if err != nil {
			t.Fatal(err)
		}
		tickets[u] = st.Ticket
	}
	room := func() application.RoomFigures {
		t.Helper()
		b, err := w.board.Handle(ctx, application.SaleBoardQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var got *application.RoomFigures
		for _, s := range b.Sales {
			switch s.Voucher.ID() {
			case id:
				got = s.Room
			case plain:
				if s.Room != nil {
					t.Fatalf("the sale without a room shows one: %+v", *s.Room)
				}
			}
		}
		if got == nil {
			t.Fatalf("the sale with a room shows none: %+v", b.Sales)
		}
		return *got
	}
	w.clock.Advance(application.RoomRefresh)
	if f := room(); f.Joined != 6 || f.Waiting != 6 || f.Admitted != 0 || f.Drawn {
		t.Fatalf("before the begin: %+v; want 6 joined, all waiting, none admitted, not drawn", f)
	}
	// One second after the begin the rate (4/s) has admitted 4.
	w.clock.Set(begin.Add(time.Second))
	f := room()
	if f.Joined != 6 || f.Waiting != 2 || f.Admitted != 4 || !f.Drawn || f.Used != 0 {
		t.Fatalf("a second after the begin: %+v; want 4 admitted, 2 waiting, drawn", f)
	}
	// An admitted user's pass is used by their claim; the board counts it.
	sts := w.pollAll(t, id, tickets)
	for u, st := range sts {
		if st.Phase != application.RoomAdmitted {
			continue
		}
		pass := st.Pass
		p, err := w.room.Check(ctx, id, u, roomPass(pass))
		if err != nil {
			t.Fatalf("the pass of user %d: %v", u, err)
		}
		if err := w.room.Used(ctx, id, u, p); err != nil {
			t.Fatal(err)
		}
		break
	}
	w.clock.Advance(application.RoomRefresh)
	if f := room(); f.Used != 1 || f.Lapsed != 0 {
		t.Fatalf("after one pass used: %+v; want 1 used, none expired", f)
	}
}

// TestRoomSaysSoldOutAtOnceAndWhenToPoll: once nothing is left to sell,
// waiting users and new joiners are told sold_out on their next answer
// (late joiners once waited ~25 s for a pass that could only answer
// sold_out), and a unit that comes back reopens the line. Every answer that
// expects change says when to ask again; the pre-queue says the user is in
// the draw.
func TestRoomSaysSoldOutAtOnceAndWhenToPoll(t *testing.T) {
	ctx := context.Background()
	begin := now.Add(time.Minute)
	w := newRoomWorld(t, now)
	id := w.sale(t, 1, begin, rules(t, time.Minute, 1000, 10*time.Second, 0))
	tickets := make(map[domain.UserID]string)
	for u := domain.UserID(1); u <= 3; u++ {
		st, err := w.room.Join(ctx, id, u)
		if err != nil {
			t.Fatal(err)
		}
		if !st.InDraw() || st.PollAfter < application.RoomRefresh {
			t.Fatalf("joined before the start: %+v; want the pre-queue, in the draw, with when to poll", st)
		}
		tickets[u] = st.Ticket
	}
	w.clock.Set(begin.Add(time.Second))
	var buyer domain.UserID
	var pass string
	for u, st := range w.pollAll(t, id, tickets) {
		switch st.Phase {
		case application.RoomAdmitted:
			buyer, pass = u, st.Pass
		case application.RoomWaiting:
			if st.PollAfter < application.RoomRefresh || st.PollAfter > 5*time.Second {
				t.Fatalf("waiting user %d: poll after %s; want within %s..5s", u, st.PollAfter, application.RoomRefresh)
			}
		default:
			t.Fatalf("user %d: %+v", u, st)
		}
	}
	sold := w.buyWithPass(t, id, buyer, pass)
	w.clock.Advance(application.RoomRefresh)
	for u, st := range w.pollAll(t, id, tickets) {
		if u != buyer && (st.Phase != application.RoomSoldOut || st.PollAfter != 0) {
			t.Fatalf("user %d once the last unit sold: %+v; want sold_out, no need to poll", u, st)
		}
	}
	if st, err := w.room.Join(ctx, id, 9); err != nil || st.Phase != application.RoomSoldOut {
		t.Fatalf("a late joiner: %+v, %v; want sold_out at once", st, err)
	}
	// The order lapses and its unit returns: the line moves again.
	if err := w.gate.Return(ctx, []domain.VoucherOrder{sold}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(application.RoomRefresh)
	admitted := 0
	for u, st := range w.pollAll(t, id, tickets) {
		if u != buyer && st.Phase == application.RoomAdmitted {
			admitted++
		}
	}
	if admitted != 1 {
		t.Fatalf("after a unit came back: %d admitted; want the next in line", admitted)
	}
}

// TestAJoinAfterTheDrawClosedIsNotToldItIsInIt: another instance's request
// closed the draw (its clock past the begin) while this instance's view of
// the room, read a moment before, still has it open; a join that runs after
// the close, though its own clock is before the begin, gets an index past the
// draw and must be answered with that place, not "pre_queue".
func TestAJoinAfterTheDrawClosedIsNotToldItIsInIt(t *testing.T) {
	ctx := context.Background()
	begin := now.Add(time.Minute)
	w := newRoomWorld(t, now)
	id := w.sale(t, 10, begin, rules(t, time.Minute, 10, time.Minute, 0))
	w.clock.Set(begin.Add(-100 * time.Millisecond))
	for u := domain.UserID(1); u <= 3; u++ { // the view is read: the draw is open
		if st, err := w.room.Join(ctx, id, u); err != nil || !st.InDraw() {
			t.Fatalf("join of %d before the begin: %+v, %v", u, st, err)
		}
	}
	// Another instance, its clock a millisecond past the begin, closes it.
	if _, err := w.rooms.Advance(ctx, id, begin.Add(time.Millisecond), [domain.RoomSeedSize]byte{9}, -1); err != nil {
		t.Fatal(err)
	}
	w.clock.Set(begin.Add(-50 * time.Millisecond)) // this instance's view is still fresh
	st, err := w.room.Join(ctx, id, 4)
	if err != nil {
		t.Fatal(err)
	}
	if st.InDraw() || st.Position != 4 {
		t.Fatalf("a join after the draw closed: %+v; want place 4, after the 3 drawn, not pre_queue", st)
	}
}
