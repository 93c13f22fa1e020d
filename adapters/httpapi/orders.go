package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
)

// orderDTO is an order and where it stands; ids are strings (beyond 2^53).
type orderDTO struct {
	ID          string      `json:"id"`
	VoucherID   string      `json:"voucherId"`
	UserID      string      `json:"userId"`
	State       string      `json:"state"`
	Reason      string      `json:"reason,omitempty"` // why failed, cancelled or refunding
	PayDeadline string      `json:"payDeadline,omitempty"`
	Payment     *paymentDTO `json:"payment,omitempty"` // a payment notification's answer only
}

// paymentDTO is what one provider transaction did (domain.PaymentKind).
type paymentDTO struct {
	TransactionID string `json:"transactionId"`
	Kind          string `json:"kind"`
	RefundOwed    bool   `json:"refundOwed"`
}

// claimSeckill is the hot path: one use-case call, one answer, logging that costs nothing unless debug.
func (a *api) claimSeckill(w http.ResponseWriter, r *http.Request, voucher int64) error {
	user := userFrom(r.Context())
	c, err := a.Claim.Claim(r.Context(), application.Claim{
		User: user, Voucher: domain.VoucherID(voucher), Arrived: recorderOf(r.Context()).arrived, Pass: (*passOf)(r),
	})
	if e := a.Log.Debug(); e.Enabled() {
		e.Str("request_id", requestID(r)).Int64("voucher", voucher).Int64("user", int64(user)).
			Int64("order", int64(c.Order)).AnErr("outcome", err).Msg("seckill claim")
	}
	if err != nil {
		return err
	}
	if c.PassUnspent != nil {
		a.Log.Warn().Err(c.PassUnspent).Str("request_id", requestID(r)).Int64("voucher", voucher).
			Msg("recording a used waiting-room pass failed; its place frees when the pass expires")
	}
	writeOKID(w, int64(c.Order))
	return nil
}

func (a *api) orderStatus(w http.ResponseWriter, r *http.Request, id int64) error {
	st, err := a.GetOrder.Handle(r.Context(), userFrom(r.Context()), domain.OrderID(id))
	return writeOrder(w, st, err)
}

// SignatureHeader carries the lower-case hex HMAC-SHA256 of a payment
// notification's raw body, keyed with SECKILL_PAYMENT_SECRET.
const SignatureHeader = "X-Seckill-Signature"

func toOrderDTO(st domain.OrderStatus) orderDTO {
	d := orderDTO{
		ID: strconv.FormatInt(int64(st.Order.ID()), 10), VoucherID: strconv.FormatInt(int64(st.Order.VoucherID()), 10),
		UserID: strconv.FormatInt(int64(st.Order.UserID()), 10), State: string(st.State),
	}
	switch st.State {
	case domain.OrderFailed:
		d.Reason = string(st.Reason)
	case domain.OrderCancelled, domain.OrderRefunding:
		d.Reason = string(st.CancelReason)
	}
	if by := st.PayBy(); !by.IsZero() {
		d.PayDeadline = by.UTC().Format(time.RFC3339)
	}
	return d
}

func writeOrder(w http.ResponseWriter, st domain.OrderStatus, err error) error {
	if err == nil {
		writeOK(w, toOrderDTO(st))
	}
	return err
}

func (a *api) cancelOrder(w http.ResponseWriter, r *http.Request, id int64) error {
	// Bounded as a claim: a retry is idempotent, and the expiry loop finishes a return left half-done.
	ctx, cancel := context.WithTimeout(r.Context(), application.ClaimBudget)
	defer cancel()
	st, err := a.Cancel.Handle(ctx, userFrom(r.Context()), domain.OrderID(id))
	return writeOrder(w, st, err)
}

// paymentNotice is a provider's notification; amount is in fen and required.
type paymentNotice struct {
	OrderID       string `json:"orderId"`
	Amount        *int64 `json:"amount"`
	TransactionID string `json:"transactionId"`
}

// paymentNotify checks the signature on the raw bytes (at most 4 KiB buffered) before parsing anything.
func (a *api) paymentNotify(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<10))
	if err != nil {
		return jsonError(err)
	}
	// Constant time; the route is mounted only with a secret.
	if !hmac.Equal([]byte(Sign(a.PaymentSecret, body)), []byte(r.Header.Get(SignatureHeader))) {
		return errBadSignature
	}
	var n paymentNotice
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err := decodeJSON(r, &n); err != nil {
		return err
	}
	id, err := strconv.ParseInt(n.OrderID, 10, 64)
	if err != nil || id <= 0 || n.OrderID != strconv.FormatInt(id, 10) {
		return badRequest("orderId must be a positive decimal integer in a string")
	}
	if n.Amount == nil {
		return badRequest("amount is required (fen)")
	}
	res, err := a.Pay.Handle(r.Context(), application.PaymentNotice{
		Order: domain.OrderID(id), Amount: *n.Amount, TransactionID: n.TransactionID,
	})
	if err != nil {
		return err
	}
	// 200 whenever the money is recorded: a provider retries anything else.
	d := toOrderDTO(res.Status)
	d.Payment = &paymentDTO{TransactionID: n.TransactionID, Kind: string(res.Kind), RefundOwed: res.Kind.Owed()}
	writeOK(w, d)
	return nil
}

// Sign is the signature a provider sends with body (tests and tools).
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

const (
	idempotencyKeyHeader = "Idempotency-Key"
	localLayout          = "2006-01-02T15:04:05" // the original's zone-less LocalDateTime
)

// A sale's times are within [minTime, maxTime): an offset could push 9999-12-31 past MariaDB's year 9999.
var (
	minTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// addVoucherRequest is the original's Voucher JSON plus the sale's options; pointers tell "missing" from zero.
type addVoucherRequest struct {
	ShopID       int64            `json:"shopId"`
	Title        string           `json:"title"`
	SubTitle     string           `json:"subTitle"`
	Rules        string           `json:"rules"`
	PayValue     int64            `json:"payValue"`
	ActualValue  int64            `json:"actualValue"`
	Type         *int             `json:"type"`
	Stock        *int             `json:"stock"`
	BeginTime    string           `json:"beginTime"`
	EndTime      string           `json:"endTime"`
	Buckets      *int             `json:"buckets"`      // Redis shards of the stock
	LimitPerUser *int             `json:"limitPerUser"` // orders one user may hold
	WaitingRoom  *waitingRoomJSON `json:"waitingRoom"`
}

// voucherDTO is a voucher as the original's /voucher/list returns it (the id a string); sale fields omitempty.
type voucherDTO struct {
	ID           string           `json:"id"`
	ShopID       int64            `json:"shopId"`
	Title        string           `json:"title"`
	SubTitle     string           `json:"subTitle"`
	Rules        string           `json:"rules"`
	PayValue     int64            `json:"payValue"`
	ActualValue  int64            `json:"actualValue"`
	Type         int8             `json:"type"`
	Status       int8             `json:"status"`
	Stock        *int             `json:"stock,omitempty"`
	BeginTime    string           `json:"beginTime,omitempty"`
	EndTime      string           `json:"endTime,omitempty"`
	LimitPerUser int              `json:"limitPerUser,omitempty"`
	WaitingRoom  *waitingRoomJSON `json:"waitingRoom,omitempty"`
}

func (a *api) addSeckillVoucher(w http.ResponseWriter, r *http.Request) error {
	var req addVoucherRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.Type != nil && *req.Type != int(domain.VoucherSeckill) {
		return &domain.ValidationError{Field: "type", Reason: "must be 1 (seckill) on this endpoint"}
	}
	if req.Stock == nil {
		return &domain.ValidationError{Field: "stock", Reason: "is required"}
	}
	begin, err := a.parseTime("beginTime", req.BeginTime)
	if err != nil {
		return err
	}
	end, err := a.parseTime("endTime", req.EndTime)
	if err != nil {
		return err
	}
	// Each step runs only if the ones before it succeeded.
	sale, err := domain.NewSaleAt(a.Clock.Now(), *req.Stock, begin, end)
	buckets := req.Buckets
	if sp := a.Split; err == nil && buckets == nil && sp.Above > 0 && sp.Into > 1 && sale.Stock() > sp.Above {
		buckets = new(min(sp.Into, sale.Stock(), domain.MaxBuckets))
	}
	if err == nil && buckets != nil {
		sale, err = sale.WithBuckets(*buckets)
	}
	if err == nil && req.LimitPerUser != nil {
		sale, err = sale.WithLimitPerUser(*req.LimitPerUser)
	}
	if err == nil && req.WaitingRoom != nil {
		var rules domain.RoomRules
		if rules, err = a.roomRules(req.WaitingRoom); err == nil {
			sale, err = sale.WithRoom(a.Clock.Now(), rules)
		}
	}
	if err != nil {
		return err
	}
	v, err := domain.NewSeckillVoucher(domain.VoucherSpec{
		ShopID: domain.ShopID(req.ShopID), Title: req.Title, SubTitle: req.SubTitle, Rules: req.Rules,
		PayValue: req.PayValue, ActualValue: req.ActualValue,
	}, sale)
	if err != nil {
		return err
	}
	// An admin's retry carries the same key and gets the first attempt's voucher.
	saved, err := a.AddVoucher.HandleOnce(r.Context(), userFrom(r.Context()), r.Header.Get(idempotencyKeyHeader), v)
	if err != nil {
		return err
	}
	a.lists.forget(strconv.FormatInt(int64(saved.ShopID()), 10))
	writeOK(w, strconv.FormatInt(int64(saved.ID()), 10))
	return nil
}

// parseTime reads the original's zone-less format in the configured zone, or RFC 3339 with an offset.
func (a *api) parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, &domain.ValidationError{Field: field, Reason: "is required"}
	}
	t, err := time.ParseInLocation(localLayout, s, a.Location)
	if err != nil {
		t, err = time.Parse(time.RFC3339, s)
	}
	switch {
	case err != nil:
		return time.Time{}, &domain.ValidationError{Field: field,
			Reason: "must look like 2026-11-29T20:00:00 (server zone) or 2026-11-29T20:00:00+08:00"}
	case t.Before(minTime) || !t.Before(maxTime):
		return time.Time{}, &domain.ValidationError{Field: field,
			Reason: fmt.Sprintf("must be within 2000-01-01 and 2100-01-01 (UTC), got %s", t.UTC().Format(time.RFC3339))}
	}
	return t, nil
}

func (a *api) listShopVouchers(w http.ResponseWriter, r *http.Request, shop int64) error {
	// Public: a flood costs the database one query per shop per TTL.
	body, err := a.lists.get(r.Context(), strconv.FormatInt(shop, 10), func(ctx context.Context) ([]byte, error) {
		vs, err := a.ListVouchers.Handle(ctx, domain.ShopID(shop))
		if err != nil {
			return nil, err
		}
		out := make([]voucherDTO, 0, len(vs))
		for _, v := range vs {
			out = append(out, a.voucherDTO(v))
		}
		return json.Marshal(envelope{Success: true, Data: out})
	})
	if err != nil {
		return err
	}
	writeBody(w, http.StatusOK, body)
	return nil
}

func (a *api) voucherDTO(v domain.Voucher) voucherDTO {
	d := voucherDTO{
		ID: strconv.FormatInt(int64(v.ID()), 10), ShopID: int64(v.ShopID()),
		Title: v.Title(), SubTitle: v.SubTitle(), Rules: v.Rules(),
		PayValue: v.PayValue(), ActualValue: v.ActualValue(), Type: int8(v.Type()), Status: v.Status(),
	}
	if v.IsSeckill() {
		s := v.Sale()
		d.Stock = new(s.Stock())
		d.BeginTime = s.Begin().In(a.Location).Format(localLayout)
		d.EndTime = s.End().In(a.Location).Format(localLayout)
		d.LimitPerUser = s.LimitPerUser()
		if s.HasRoom() {
			r := s.Room()
			d.WaitingRoom = &waitingRoomJSON{
				OpensBeforeSeconds: new(int64(r.OpensBefore() / time.Second)), AdmitPerSecond: new(r.AdmitPerSecond()),
				PassTTLSeconds: new(int64(r.PassTTL() / time.Second)), Margin: new(r.Margin()),
			}
		}
	}
	return d
}

// A claim carries its room pass in RoomPassHeader (or ?pass=); a poll its ticket in ?ticket= (or RoomTicketHeader).
const (
	RoomPassHeader   = "X-Room-Pass"
	RoomTicketHeader = "X-Room-Ticket"
	maxRoomToken     = 128 // a real ticket or pass is 67 characters
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

// writeRoomStatus answers a join or a poll, with Retry-After when to come back.
func writeRoomStatus(w http.ResponseWriter, st application.RoomStatus, err error) error {
	if err != nil {
		return err
	}
	d := roomStatusDTO{
		Ticket: st.Ticket, State: string(st.Phase), Position: st.Position, Joined: st.Joined, InDraw: st.InDraw(),
		WaitSeconds: int64((st.Wait + time.Second - 1) / time.Second), DrawAt: st.DrawAt.UTC().Format(time.RFC3339Nano),
		Pass: st.Pass, PollAfterMs: st.PollAfter.Milliseconds(),
	}
	if !st.InDraw() {
		d.Ahead = new(st.Ahead)
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
	ticket := cmp.Or(r.URL.Query().Get("ticket"), r.Header.Get(RoomTicketHeader))
	if len(ticket) > maxRoomToken {
		return domain.ErrNotInRoom
	}
	st, err := a.Rooms.Poll(r.Context(), domain.VoucherID(voucher), userFrom(r.Context()), ticket)
	return writeRoomStatus(w, st, err)
}

// passOf is a claim request as its pass's source (converted without allocating).
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

// waitingRoomJSON is a room's rules as a request gives them (nil: missing) and the voucher list shows them.
type waitingRoomJSON struct {
	OpensBeforeSeconds *int64 `json:"opensBeforeSeconds"`
	AdmitPerSecond     *int   `json:"admitPerSecond"`
	PassTTLSeconds     *int64 `json:"passTtlSeconds"` // 60 if missing
	Margin             *int   `json:"margin"`
}

func (a *api) roomRules(req *waitingRoomJSON) (domain.RoomRules, error) {
	invalid := func(field, reason string) (domain.RoomRules, error) {
		return domain.RoomRules{}, &domain.ValidationError{Field: "waitingRoom" + field, Reason: reason}
	}
	switch {
	case a.Rooms == nil:
		return invalid("", "waiting rooms are not enabled on this service")
	case req.OpensBeforeSeconds == nil:
		return invalid(".opensBeforeSeconds", "is required")
	case req.AdmitPerSecond == nil:
		return invalid(".admitPerSecond", "is required")
	}
	opens, ttl := *req.OpensBeforeSeconds, *cmp.Or(req.PassTTLSeconds, new(int64(60)))
	// Beyond a year the durations could overflow: refused in the client's words.
	const maxSeconds = int64(365 * 24 * 3600)
	switch {
	case opens < 0 || opens > maxSeconds:
		return invalid(".opensBeforeSeconds", fmt.Sprintf("must be within 0..%d seconds, got %d", maxSeconds, opens))
	case ttl < 0 || ttl > maxSeconds:
		return invalid(".passTtlSeconds", fmt.Sprintf("must be within 0..%d seconds, got %d", maxSeconds, ttl))
	}
	return domain.NewRoomRules(time.Duration(opens)*time.Second, *req.AdmitPerSecond, time.Duration(ttl)*time.Second,
		*cmp.Or(req.Margin, new(0)))
}
