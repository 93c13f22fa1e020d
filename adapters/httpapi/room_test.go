package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// roomVoucherJSON is a creation body whose sale begins at begin, with the
// waiting room room (a JSON object).
func roomVoucherJSON(stock int, begin time.Time, room string) string {
	body := voucherJSON(1, stock, begin, begin.Add(time.Hour))
	return strings.TrimSuffix(body, "}") + `,"waitingRoom":` + room + `}`
}

type roomStatus struct {
	Ticket      string `json:"ticket"`
	State       string `json:"state"`
	Position    int64  `json:"position"`
	Ahead       int64  `json:"ahead"`
	Joined      int64  `json:"joined"`
	WaitSeconds int64  `json:"waitSeconds"`
	Pass        string `json:"pass"`
	PassExpires string `json:"passExpires"`
}

func (r result) room(t *testing.T) roomStatus {
	t.Helper()
	var st roomStatus
	if err := json.Unmarshal(r.Data, &st); err != nil || st.Ticket == "" {
		t.Fatalf("room status %s: %v", r.raw, err)
	}
	return st
}

func TestCreateVoucherWithWaitingRoom(t *testing.T) {
	begin := now.Add(time.Minute)
	for _, tc := range []struct {
		name  string
		room  string
		begin time.Time
		field string // "" = created
	}{
		{"all_fields", `{"opensBeforeSeconds":600,"admitPerSecond":50,"passTtlSeconds":30,"margin":5}`, begin, ""},
		{"defaults", `{"opensBeforeSeconds":600,"admitPerSecond":50}`, begin, ""},
		{"opens_missing", `{"admitPerSecond":50}`, begin, "waitingRoom.opensBeforeSeconds"},
		{"rate_missing", `{"opensBeforeSeconds":600}`, begin, "waitingRoom.admitPerSecond"},
		{"rate_zero", `{"opensBeforeSeconds":600,"admitPerSecond":0}`, begin, "waitingRoom.admitPerSecond"},
		{"opens_negative", `{"opensBeforeSeconds":-1,"admitPerSecond":5}`, begin, "waitingRoom.opensBeforeSeconds"},
		{"opens_huge", `{"opensBeforeSeconds":9223372036854775807,"admitPerSecond":5}`, begin, "waitingRoom.opensBeforeSeconds"},
		{"ttl_too_short", `{"opensBeforeSeconds":600,"admitPerSecond":5,"passTtlSeconds":1}`, begin, "waitingRoom.passTtlSeconds"},
		{"margin_negative", `{"opensBeforeSeconds":600,"admitPerSecond":5,"margin":-1}`, begin, "waitingRoom.margin"},
		{"unknown_field", `{"opensBeforeSeconds":600,"admitPerSecond":5,"captcha":true}`, begin, "captcha"},
		// Inside the room as at the top: a key given twice, or matching a
		// field only case-insensitively, is refused, not the last or the
		// look-alike taken.
		{"duplicate_field", `{"opensBeforeSeconds":600,"admitPerSecond":50,"admitPerSecond":5000}`, begin, `duplicate field "waitingRoom.admitPerSecond"`},
		{"case_variant_field", `{"opensBeforeSeconds":600,"AdmitPerSecond":50}`, begin, `did you mean "waitingRoom.admitPerSecond"?`},
		{"begins_too_soon", `{"opensBeforeSeconds":600,"admitPerSecond":5}`, now.Add(time.Second), "beginTime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, options{})
			res := e.do(req{method: "POST", path: "/voucher/seckill", token: e.adminToken(), body: roomVoucherJSON(5, tc.begin, tc.room)})
			if tc.field == "" {
				if !res.Success {
					t.Fatalf("got %s; want created", res.raw)
				}
				list := e.mustOK(req{method: "GET", path: "/voucher/list/1"})
				if !strings.Contains(string(list.Data), `"waitingRoom":{"opensBeforeSeconds":600,"admitPerSecond":50`) {
					t.Fatalf("the list does not show the room: %s", list.Data)
				}
				return
			}
			if res.status != http.StatusBadRequest || !strings.Contains(res.ErrorMsg, tc.field) {
				t.Fatalf("got %d %s; want 400 naming %s", res.status, res.raw, tc.field)
			}
			if n := e.calls.snapshot()["vouchers.AddSeckillOnce"]; n != 0 {
				t.Fatalf("a refused room stored a voucher (%d calls)", n)
			}
		})
	}
	// The error names what the client sent, in JSON's words: never a Go
	// type, never a value wrapped around by a conversion.
	for _, tc := range []struct{ name, room, want, never string }{
		{"room_not_an_object", `"soon"`, "waitingRoom must be an object", "httpapi."},
		{"opens_of_2_62_seconds", `{"opensBeforeSeconds":4611686018427387904,"admitPerSecond":5}`, "got 4611686018427387904", "-1s"},
		{"ttl_of_2_62_seconds", `{"opensBeforeSeconds":600,"admitPerSecond":5,"passTtlSeconds":4611686018427387904}`, "got 4611686018427387904", "-1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, options{})
			res := e.do(req{method: "POST", path: "/voucher/seckill", token: e.adminToken(), body: roomVoucherJSON(5, begin, tc.room)})
			if res.status != http.StatusBadRequest || !strings.Contains(res.ErrorMsg, tc.want) || strings.Contains(res.ErrorMsg, tc.never) {
				t.Fatalf("got %d %q; want 400 saying %q, never %q", res.status, res.ErrorMsg, tc.want, tc.never)
			}
		})
	}
	t.Run("rooms_off", func(t *testing.T) {
		e := newEnv(t, options{noRooms: true})
		res := e.do(req{method: "POST", path: "/voucher/seckill", token: e.adminToken(),
			body: roomVoucherJSON(5, begin, `{"opensBeforeSeconds":600,"admitPerSecond":50}`)})
		if res.status != http.StatusBadRequest || !strings.Contains(res.ErrorMsg, "waitingRoom") {
			t.Fatalf("got %d %s; want 400", res.status, res.raw)
		}
	})
}

// The whole way through HTTP: join, poll, admission at the begin, the claim
// with the pass; and the refusals of everyone without one.
func TestWaitingRoomFlow(t *testing.T) {
	e := newEnv(t, options{})
	begin := now.Add(time.Minute)
	id := e.mustOK(req{method: "POST", path: "/voucher/seckill", token: e.adminToken(),
		body: roomVoucherJSON(5, begin, `{"opensBeforeSeconds":30,"admitPerSecond":1,"passTtlSeconds":10}`)}).dataString(t)
	plain := e.addVoucher(1, 5)
	alice, bob := e.token(1), e.token(2)
	join := func(tok string) result {
		return e.do(req{method: "POST", path: "/voucher-order/room/" + id + "/join", token: tok})
	}
	poll := func(tok, ticket string) result {
		return e.do(req{method: "GET", path: "/voucher-order/room/" + id + "?ticket=" + ticket, token: tok})
	}

	wantRefusal(t, join(alice), http.StatusOK, "room_not_open", "等候室尚未开放")
	wantRefusal(t, e.do(req{method: "POST", path: "/voucher-order/room/" + plain + "/join", token: alice}), http.StatusOK, "no_room", "")
	if res := e.do(req{method: "POST", path: "/voucher-order/room/" + id + "/join"}); res.status != http.StatusUnauthorized {
		t.Fatalf("join without a token: %d", res.status)
	}

	e.clock.Set(begin.Add(-20 * time.Second))
	a := e.mustOK(req{method: "POST", path: "/voucher-order/room/" + id + "/join", token: alice}).room(t)
	b := e.mustOK(req{method: "POST", path: "/voucher-order/room/" + id + "/join", token: bob}).room(t)
	if a.State != "pre_queue" || a.Position != 0 || b.Joined != 2 {
		t.Fatalf("in the pre-queue: %+v, %+v", a, b)
	}
	if again := e.mustOK(req{method: "POST", path: "/voucher-order/room/" + id + "/join", token: alice}).room(t); again.Ticket != a.Ticket {
		t.Fatal("joining again gave another ticket")
	}
	wantRefusal(t, poll(bob, a.Ticket), http.StatusOK, "not_in_room", "您不在该等候室中，请先加入排队")
	wantRefusal(t, poll(alice, "forged"), http.StatusOK, "not_in_room", "")
	wantRefusal(t, poll(alice, strings.Repeat("a", 200)), http.StatusOK, "not_in_room", "")

	// A claim without a pass is refused before the admission runs.
	e.clock.Set(begin.Add(1500 * time.Millisecond))
	before := e.calls.snapshot()["Admit"]
	wantRefusal(t, e.claim(id, alice), http.StatusOK, "pass_required", "该秒杀需要排队：请先进入等候室，轮到您后再抢购")
	if got := e.calls.snapshot()["Admit"]; got != before {
		t.Fatalf("a claim without a pass reached the admission (%d calls)", got-before)
	}
	// 1.5 s after the begin at 1/s, one of the two is admitted.
	pa, pb := poll(alice, a.Ticket).room(t), poll(bob, b.Ticket).room(t)
	first, firstTok, second, secondTok := pa, alice, pb, bob
	if pb.State == "admitted" {
		first, firstTok, second, secondTok = pb, bob, pa, alice
	}
	if first.State != "admitted" || first.Pass == "" || first.Position != 1 || second.State != "waiting" || second.Ahead != 0 || second.WaitSeconds != 1 {
		t.Fatalf("after the begin: %+v, %+v", first, second)
	}
	// Another user's pass is no pass; the own pass, in the header, claims.
	res := e.do(req{method: "POST", path: "/voucher-order/seckill/" + id, token: secondTok, header: map[string]string{"X-Room-Pass": first.Pass}})
	wantRefusal(t, res, http.StatusOK, "pass_required", "")
	res = e.do(req{method: "POST", path: "/voucher-order/seckill/" + id, token: firstTok, header: map[string]string{"X-Room-Pass": first.Pass}})
	if !res.Success {
		t.Fatalf("a claim with its pass: %s", res.raw)
	}
	// The second is admitted a second later, and may pass it in the query.
	e.clock.Advance(time.Second)
	second = poll(secondTok, second.Ticket).room(t)
	if second.State != "admitted" {
		t.Fatalf("a second later: %+v", second)
	}
	e.clock.Advance(10 * time.Second)
	wantRefusal(t, e.do(req{method: "POST", path: "/voucher-order/seckill/" + id + "?pass=" + second.Pass, token: secondTok}),
		http.StatusOK, "pass_expired", "您的抢购资格已过期，名额已让给后面排队的用户")
	if st := poll(secondTok, second.Ticket).room(t); st.State != "expired" {
		t.Fatalf("after its pass expired: %+v", st)
	}
	// A sale without a room claims as ever, pass or not.
	if res := e.claim(plain, alice); !res.Success {
		t.Fatalf("a claim of a sale without a room: %s", res.raw)
	}
	if got := e.rooms.Calls(); got > 12 {
		t.Fatalf("the room store was called %d times; polls must answer from memory", got)
	}
	// The live sale page's figures: two joined, both admitted, one pass used
	// and one lapsed; the sale without a room shows none.
	board, _ := e.board()
	for _, s := range board.Sales {
		switch r := s.Room; s.ID {
		case id:
			if r == nil || r.Joined != 2 || r.Waiting != 0 || r.Admitted != 2 || r.PassesUsed != 1 || r.PassesExpired != 1 || !r.Drawn {
				t.Fatalf("the room on the sale board: %+v", r)
			}
		case plain:
			if r != nil {
				t.Fatalf("a sale without a room shows one on the board: %+v", *r)
			}
		}
	}
}
