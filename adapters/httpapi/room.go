package httpapi

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
)

// A claim carries its waiting-room pass in RoomPassHeader (or the query's
// "pass"); a poll its ticket in the query's "ticket" (or RoomTicketHeader).
const (
	RoomPassHeader   = "X-Room-Pass"
	RoomTicketHeader = "X-Room-Ticket"
	// maxRoomToken: a real ticket or pass is 67 characters; longer is refused
	// without decoding.
	maxRoomToken = 128
)

// roomStatusDTO is a join's or a poll's answer.
type roomStatusDTO struct {
	Ticket      string `json:"ticket"`
	State       string `json:"state"` // pre_queue | waiting | admitted | expired | sold_out
	Position    int64  `json:"position,omitempty"`
	Ahead       *int64 `json:"ahead,omitempty"` // nil in the pre-queue, not drawn yet
	Joined      int64  `json:"joined"`
	InDraw      bool   `json:"inDraw,omitempty"`
	PollAfterMs int64  `json:"pollAfterMs,omitempty"`
	WaitSeconds int64  `json:"waitSeconds"` // estimated, rounded up
	DrawAt      string `json:"drawAt"`
	Pass        string `json:"pass,omitempty"`
	PassExpires string `json:"passExpires,omitempty"`
}

// writeRoomStatus answers a join or a poll, with Retry-After (whole seconds,
// rounded up) when the client should come back.
func writeRoomStatus(w http.ResponseWriter, st application.RoomStatus, err error) error {
	if err != nil {
		return err
	}
	d := roomStatusDTO{
		Ticket: st.Ticket, State: string(st.Phase), Position: st.Position, Joined: st.Joined, InDraw: st.InDraw(),
		WaitSeconds: int64((st.Wait + time.Second - 1) / time.Second),
		DrawAt:      st.DrawAt.UTC().Format(time.RFC3339Nano),
		Pass:        st.Pass,
		PollAfterMs: st.PollAfter.Milliseconds(),
	}
	if !st.InDraw() {
		ahead := st.Ahead
		d.Ahead = &ahead
	}
	if !st.PassExpires.IsZero() {
		d.PassExpires = st.PassExpires.UTC().Format(time.RFC3339Nano)
	}
	if st.PollAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((st.PollAfter+time.Second-1)/time.Second), 10))
	}
	writeOK(w, d)
	return nil
}

func (a *api) joinRoom(w http.ResponseWriter, r *http.Request, voucher int64) error {
	st, err := a.Rooms.Join(r.Context(), domain.VoucherID(voucher), userFrom(r.Context()))
	return writeRoomStatus(w, st, err)
}

func (a *api) pollRoom(w http.ResponseWriter, r *http.Request, voucher int64) error {
	ticket := r.URL.Query().Get("ticket")
	if ticket == "" {
		ticket = r.Header.Get(RoomTicketHeader)
	}
	if len(ticket) > maxRoomToken {
		return domain.ErrNotInRoom
	}
	st, err := a.Rooms.Poll(r.Context(), domain.VoucherID(voucher), userFrom(r.Context()), ticket)
	return writeRoomStatus(w, st, err)
}

// passOf is a claim request as its pass's source (a pointer converts to the
// interface without allocating).
type passOf http.Request

// RoomPass is the claim's pass; an oversized one is no pass.
func (p *passOf) RoomPass() string {
	r := (*http.Request)(p)
	pass := r.Header.Get(RoomPassHeader)
	if pass == "" {
		pass = r.URL.Query().Get("pass")
	}
	if len(pass) > maxRoomToken {
		return ""
	}
	return pass
}

// waitingRoomRequest is a voucher's optional waiting room at creation.
type waitingRoomRequest struct {
	OpensBeforeSeconds *int64 `json:"opensBeforeSeconds"`
	AdmitPerSecond     *int   `json:"admitPerSecond"`
	PassTTLSeconds     *int64 `json:"passTtlSeconds"`
	Margin             *int   `json:"margin"`
}

// defaultPassTTL is a pass's life in seconds when the request names none.
const defaultPassTTL = 60

func (a *api) roomRules(req *waitingRoomRequest) (domain.RoomRules, error) {
	if a.Rooms == nil {
		return domain.RoomRules{}, &domain.ValidationError{Field: "waitingRoom", Reason: "waiting rooms are not enabled on this service"}
	}
	if req.OpensBeforeSeconds == nil {
		return domain.RoomRules{}, &domain.ValidationError{Field: "waitingRoom.opensBeforeSeconds", Reason: "is required"}
	}
	if req.AdmitPerSecond == nil {
		return domain.RoomRules{}, &domain.ValidationError{Field: "waitingRoom.admitPerSecond", Reason: "is required"}
	}
	ttl, margin := *cmp.Or(req.PassTTLSeconds, new(int64(defaultPassTTL))), *cmp.Or(req.Margin, new(0))
	// Beyond a year the durations could overflow: refused in the client's words.
	const maxSeconds = int64(365 * 24 * 3600)
	opens := *req.OpensBeforeSeconds
	if opens < 0 || opens > maxSeconds {
		return domain.RoomRules{}, &domain.ValidationError{Field: "waitingRoom.opensBeforeSeconds",
			Reason: fmt.Sprintf("must be within 0..%d seconds, got %d", maxSeconds, opens)}
	}
	if ttl < 0 || ttl > maxSeconds {
		return domain.RoomRules{}, &domain.ValidationError{Field: "waitingRoom.passTtlSeconds",
			Reason: fmt.Sprintf("must be within 0..%d seconds, got %d", maxSeconds, ttl)}
	}
	return domain.NewRoomRules(time.Duration(opens)*time.Second, *req.AdmitPerSecond, time.Duration(ttl)*time.Second, margin)
}

// waitingRoomDTO is a room sale's settings in its listing.
type waitingRoomDTO struct {
	OpensBeforeSeconds int64 `json:"opensBeforeSeconds"`
	AdmitPerSecond     int   `json:"admitPerSecond"`
	PassTTLSeconds     int64 `json:"passTtlSeconds"`
	Margin             int   `json:"margin"`
}
