package httpapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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

// claimSeckill is the hot path: one use-case call, one pre-encoded answer,
// and logging that costs nothing unless debug is on.
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

// maxNotifyBytes bounds what is buffered of an unauthenticated notification.
const maxNotifyBytes = 4 << 10

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
	// Bounded as a claim is: a retry is idempotent, and the expiry loop
	// finishes a return left half-done.
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

// paymentNotify checks the signature on the raw bytes before parsing anything.
func (a *api) paymentNotify(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxNotifyBytes))
	if err != nil {
		return jsonError(err)
	}
	if !validSignature(a.PaymentSecret, body, r.Header.Get(SignatureHeader)) {
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

// validSignature compares the lower-case hex MAC in constant time.
func validSignature(secret, body []byte, header string) bool {
	return len(secret) > 0 && hmac.Equal([]byte(Sign(secret, body)), []byte(header))
}

// Sign is the signature a provider sends with body (tests and tools).
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}
