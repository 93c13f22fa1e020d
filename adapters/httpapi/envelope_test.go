package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

func TestErrorTableMapsWrappedErrors(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", err)) }
	cases := []struct {
		name   string
		err    error
		status int
		code   string
		msg    string
	}{
		{"sold_out", wrap(domain.ErrSoldOut), http.StatusOK, "sold_out", "库存不足"},
		{"duplicate", wrap(domain.ErrAlreadyClaimed), http.StatusOK, "duplicate", "不能重复下单"},
		{"not_started", wrap(domain.ErrNotStarted), http.StatusOK, "not_started", "秒杀尚未开始"},
		{"ended", wrap(domain.ErrEnded), http.StatusOK, "ended", "秒杀已经结束"},
		{"voucher_not_found", wrap(domain.ErrVoucherNotFound), http.StatusOK, "not_found", ""},
		{"order_not_found", wrap(domain.ErrOrderNotFound), http.StatusNotFound, "not_found", ""},
		{"busy", wrap(fmt.Errorf("%w: %w", application.ErrBusy, ports.ErrQueueFull)), http.StatusServiceUnavailable, "busy", ""},
		{"queue_error_alone_is_internal", wrap(ports.ErrQueueFull), http.StatusInternalServerError, "internal", "服务器异常"},
		{"unknown_token", wrap(ports.ErrUnknownToken), http.StatusUnauthorized, "unauthorized", ""},
		{"forbidden", wrap(errForbidden), http.StatusForbidden, "forbidden", ""},
		{"rate_limited", wrap(errRateLimited), http.StatusTooManyRequests, "rate_limited", ""},
		{"unsupported_media_type", wrap(checkJSONType(httptest.NewRequest("POST", "/", nil))), http.StatusUnsupportedMediaType, "unsupported_media_type", `Content-Type must be application/json, got ""`},
		{"joined_with_a_refusal", errors.Join(errors.New("x"), domain.ErrSoldOut), http.StatusOK, "sold_out", "库存不足"},
		{"validation", wrap(&domain.ValidationError{Field: "stock", Reason: "must be greater than 0"}), http.StatusBadRequest, "bad_request", "invalid stock: must be greater than 0"},
		{"request_error", wrap(badRequest("id must be a positive integer")), http.StatusBadRequest, "bad_request", "id must be a positive integer"},
		{"body_too_large", errBodyTooLarge(10), http.StatusRequestEntityTooLarge, "bad_request", "request body is larger than 10 bytes"},
		{"unknown_is_internal", wrap(errors.New("dial tcp 10.0.0.1:6379: refused")), http.StatusInternalServerError, "internal", "服务器异常"},
		{"text_that_reads_like_validation_is_internal", wrap(errors.New("invalid stock")), http.StatusInternalServerError, "internal", "服务器异常"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := answerFor(tc.err)
			if a.status != tc.status || a.code != tc.code || (tc.msg != "" && a.msg != tc.msg) || a.msg == "" {
				t.Fatalf("answer = %d %q %q, want %d %q %q", a.status, a.code, a.msg, tc.status, tc.code, tc.msg)
			}
			if a.body == nil {
				return
			}
			var env envelope
			if err := json.Unmarshal(a.body, &env); err != nil || env.Success || env.Code != a.code || env.ErrorMsg != a.msg || env.Data != nil {
				t.Fatalf("pre-encoded body %s does not match the answer (%v)", a.body, err)
			}
		})
	}
}

func TestEveryRefusalHasTheOriginalsText(t *testing.T) {
	for _, r := range domain.Refusals() {
		if refusalText[r.Code()].zh == "" {
			t.Errorf("refusal %q has no text for the front end", r.Code())
		}
		if a := answerFor(fmt.Errorf("x: %w", r)); a.status != http.StatusOK || a.code != r.Code() {
			t.Errorf("refusal %q answers %d %q", r.Code(), a.status, a.code)
		}
	}
}

func TestWriteOKIDMatchesEncoder(t *testing.T) {
	for _, id := range []int64{1, 42, 1 << 53, 1<<63 - 1} {
		w := httptest.NewRecorder()
		writeOKID(w, id)
		want, _ := json.Marshal(envelope{Success: true, Data: fmt.Sprint(id)})
		if w.Code != http.StatusOK || w.Body.String() != string(want) {
			t.Fatalf("writeOKID(%d) = %d %s, want 200 %s", id, w.Code, w.Body, want)
		}
	}
}
