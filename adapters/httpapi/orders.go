package httpapi

import (
	"net/http"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
)

// orderDTO is an order and where it stands; ids are strings because they
// exceed 2^53.
type orderDTO struct {
	ID        string `json:"id"`
	VoucherID string `json:"voucherId"`
	UserID    string `json:"userId"`
	State     string `json:"state"`
	// Reason: why a failed order failed, or a cancelled (or refunding)
	// one was cancelled.
	Reason string `json:"reason,omitempty"`
	// PayDeadline: when a created (unpaid) order must be paid by.
	PayDeadline string `json:"payDeadline,omitempty"`
	// Payment: in a payment notification's answer only, what it did.
	Payment *paymentDTO `json:"payment,omitempty"`
}

// paymentDTO is what one provider transaction did (domain.PaymentKind).
type paymentDTO struct {
	TransactionID string `json:"transactionId"`
	Kind          string `json:"kind"`
	RefundOwed    bool   `json:"refundOwed"`
}

// claimSeckill is the hot path: one path parse, one use-case call, one
// pre-encoded answer, and logging that costs nothing unless debug is on.
func (a *api) claimSeckill(w http.ResponseWriter, r *http.Request) {
	voucher, err := pathID(r, "id")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	user := userFrom(r.Context())
	// The budget counts from the request's arrival: a session lookup that
	// waited on Redis spent part of it.
	c, err := a.Claim.Claim(r.Context(), application.Claim{
		User: user, Voucher: domain.VoucherID(voucher), Arrived: recorderOf(r.Context()).arrived, Pass: (*passOf)(r),
	})
	if e := a.Log.Debug(); e.Enabled() {
		e.Str("request_id", requestID(r)).
			Int64("voucher", voucher).
			Int64("user", int64(user)).
			Int64("order", int64(c.Order)).
			AnErr("outcome", err).
			Msg("seckill claim")
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if c.PassUnspent != nil {
		a.Log.Warn().Err(c.PassUnspent).Str("request_id", requestID(r)).Int64("voucher", voucher).
			Msg("recording a used waiting-room pass failed; its place frees when the pass expires")
	}
	writeOKID(w, int64(c.Order))
}
func (a *api) orderStatus(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "id")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	st, err := a.GetOrder.Handle(r.Context(), userFrom(r.Context()), domain.OrderID(id))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeOK(w, toOrderDTO(st))
}
