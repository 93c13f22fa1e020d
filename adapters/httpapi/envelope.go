package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// envelope is the original's Result plus a stable code; its front end expects refusals as 200, success=false.
type envelope struct {
	Success  bool   `json:"success"`
	ErrorMsg string `json:"errorMsg,omitempty"`
	Data     any    `json:"data,omitempty"`
	Total    int64  `json:"total,omitempty"`
	Code     string `json:"code,omitempty"`
}

// Codes used more than once; a business refusal answers its domain.Refusal's own code.
const (
	codeNotFound       = "not_found"
	codeOutcomeUnknown = "outcome_unknown" // data is the order id to look up
	codeUnauthorized   = "unauthorized"
	codeBadRequest     = "bad_request"
	codeInternal       = "internal"
)

// The adapter's own refusals, answered through errorTable.
var (
	errNoRoute          = errors.New("no such route")
	errMethodNotAllowed = errors.New("method not allowed")
	errForbidden        = errors.New("not an admin")
	errRateLimited      = errors.New("rate limited")
	errBadSignature     = errors.New("payment notification signature is missing or wrong")
)

// answer is how one kind of error is told; body is a fixed one's encoding; no msgEn when msg is English.
type answer struct {
	status           int
	code, msg, msgEn string
	body, bodyEn     []byte
}

// refusalText is each business refusal's text, in Chinese as the original front end shows it, and in English.
var refusalText = map[string]struct{ zh, en string }{
	domain.ErrSoldOut.Code():         {"库存不足", "Sold out"},
	domain.ErrAlreadyClaimed.Code():  {"不能重复下单", "You already hold as many orders of this voucher as one user may"},
	domain.ErrNotStarted.Code():      {"秒杀尚未开始", "The sale has not started yet"},
	domain.ErrEnded.Code():           {"秒杀已经结束", "The sale has ended"},
	domain.ErrPaused.Code():          {"秒杀已暂停，请稍后再试", "The sale is paused; try again later"},
	domain.ErrVoucherNotFound.Code(): {"优惠券不存在", "Voucher not found"},
	domain.ErrPassRequired.Code():    {"该秒杀需要排队：请先进入等候室，轮到您后再抢购", "This sale has a waiting room: join it, and buy when your turn comes"},
	domain.ErrPassExpired.Code():     {"您的抢购资格已过期，名额已让给后面排队的用户", "Your pass has expired; your place went to the next in line"},
	domain.ErrNoRoom.Code():          {"该优惠券没有等候室", "This voucher has no waiting room"},
	domain.ErrRoomNotOpen.Code():     {"等候室尚未开放", "The waiting room is not open yet"},
	domain.ErrNotInRoom.Code():       {"您不在该等候室中，请先加入排队", "You are not in this waiting room: join it first"},
}

var refusalAnswers = func() map[*domain.Refusal]answer {
	out := make(map[*domain.Refusal]answer)
	for _, r := range append(domain.Refusals(), domain.RoomRefusals()...) {
		t := refusalText[r.Code()]
		out[r] = fixed(http.StatusOK, r.Code(), cmp.Or(t.zh, r.Error()), t.en)
	}
	return out
}()

// errorTable is the one place other errors become HTTP answers (errors.Is).
var errorTable = []struct {
	target error
	answer answer
}{
	// Another user's order answers alike, so order IDs cannot be probed.
	{domain.ErrOrderNotFound, fixed(http.StatusNotFound, codeNotFound, "订单不存在", "Order not found")},
	{application.ErrBusy, busyAnswer},
	// The claim may have been taken: fail adds the order id to look up.
	{application.ErrOutcomeUnknown, fixed(http.StatusServiceUnavailable, codeOutcomeUnknown, "系统繁忙，下单结果未知，请稍后查询订单",
		"Busy: whether your order was taken is not known yet; look the order up in a moment")},
	{ports.ErrUnknownToken, fixed(http.StatusUnauthorized, codeUnauthorized, "未登录或登录已过期", "Not logged in, or the login has expired")},
	{errForbidden, fixed(http.StatusForbidden, "forbidden", "没有权限：需要管理员账号", "Forbidden: an admin account is needed")},
	{errRateLimited, fixed(http.StatusTooManyRequests, "rate_limited", "请求过于频繁，请稍后重试", "Too many requests; try again shortly")},
	{domain.ErrAlreadyPaid, fixed(http.StatusOK, "already_paid", "订单已支付，不能取消", "The order is paid and cannot be cancelled")},
	{errBadSignature, fixed(http.StatusUnauthorized, codeUnauthorized, "invalid payment signature", "")},
	{errNoRoute, fixed(http.StatusNotFound, codeNotFound, "接口不存在", "No such endpoint")},
	{errMethodNotAllowed, fixed(http.StatusMethodNotAllowed, codeBadRequest, "不支持该请求方法", "Method not allowed")},
}

// What the front end shows a person is in Chinese, as the original; what only a machine reads, English.
var (
	busyAnswer     = fixed(http.StatusServiceUnavailable, "busy", "系统繁忙，请稍后重试", "Busy; nothing was taken, try again shortly")
	internalAnswer = fixed(http.StatusInternalServerError, codeInternal, "服务器异常", "Server error")
	notReadyAnswer = fixed(http.StatusServiceUnavailable, "unavailable", "not ready", "")
)

// An *answer is also an error: bad input this adapter found, answered as is.
func (a *answer) Error() string { return a.msg }

func badRequest(msg string) error {
	return &answer{status: http.StatusBadRequest, code: codeBadRequest, msg: msg}
}

// answerFor maps err; anything unknown is internal, its text kept from the client.
func answerFor(err error) answer {
	if r, ok := errors.AsType[*domain.Refusal](err); ok {
		if a, ok := refusalAnswers[r]; ok {
			return a
		}
	}
	for i := range errorTable {
		if errors.Is(err, errorTable[i].target) {
			return errorTable[i].answer
		}
	}
	if ce, ok := errors.AsType[*domain.ControlError](err); ok {
		return answer{status: http.StatusConflict, code: ce.Code(), msg: ce.Error()}
	}
	if bad, ok := errors.AsType[*answer](err); ok {
		return *bad
	}
	// Validation messages name the field and rule, never internal state.
	if ve, ok := errors.AsType[*domain.ValidationError](err); ok {
		return answer{status: http.StatusBadRequest, code: codeBadRequest, msg: ve.Error()}
	}
	// A backend that did not answer in time is a 503: every change is idempotent.
	if ne, ok := errors.AsType[net.Error](err); errors.Is(err, context.DeadlineExceeded) || (ok && ne.Timeout()) {
		return busyAnswer
	}
	return internalAnswer
}

// fail answers err and hands it to the access log line.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	ans := answerFor(err)
	if ans.msgEn != "" && wantsEnglish(r) {
		ans.msg, ans.body = ans.msgEn, ans.bodyEn
	}
	noteError(r, err)
	if ans.status >= 500 {
		// The request id finds the logged detail the client does not see.
		w.Header().Set(requestIDHeader, requestID(r))
	}
	if ans.status == http.StatusServiceUnavailable {
		w.Header()["Retry-After"] = retryAfterOne
	}
	if ans.code == codeOutcomeUnknown {
		if unknown, ok := errors.AsType[*application.OutcomeUnknownError](err); ok {
			writeJSON(w, ans.status, envelope{ErrorMsg: ans.msg, Code: ans.code,
				Data: strconv.FormatInt(int64(unknown.Order), 10)})
			return
		}
	}
	if ans.body != nil {
		writeBody(w, ans.status, ans.body)
		return
	}
	writeJSON(w, ans.status, envelope{ErrorMsg: ans.msg, Code: ans.code})
}

// fixed is an answer encoded once; en is "" when msg is English already.
func fixed(status int, code, msg, en string) answer {
	a := answer{status: status, code: code, msg: msg, body: encoded(envelope{ErrorMsg: msg, Code: code})}
	if en != "" {
		a.msgEn, a.bodyEn = en, encoded(envelope{ErrorMsg: en, Code: code})
	}
	return a
}

// encoded is a fixed envelope's JSON: strings and a bool cannot fail to encode.
func encoded(env envelope) []byte {
	b, _ := json.Marshal(env)
	return b
}

// Shared header values, never mutated: an allocation less than Header().Set.
var (
	jsonContentType = []string{"application/json"}
	retryAfterOne   = []string{"1"}
)

func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Date"] = dateHeader(time.Now())
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeJSON(w http.ResponseWriter, status int, env envelope) {
	b, err := json.Marshal(env)
	if err != nil { // a programming error; the client still gets an envelope
		b = internalAnswer.body
		status = internalAnswer.status
	}
	writeBody(w, status, b)
}

func writeOK(w http.ResponseWriter, data any) {
	writeJSON(w, http.StatusOK, envelope{Success: true, Data: data})
}

// writeOKID answers a successful claim without reflection, in one allocation.
func writeOKID(w http.ResponseWriter, id int64) {
	b := append(make([]byte, 0, 48), `{"success":true,"data":"`...)
	writeBody(w, http.StatusOK, append(strconv.AppendInt(b, id, 10), `"}`...))
}

// stampedDate is every JSON answer's Date header, formatted once a second, not per answer; never mutated.
type stampedDate struct {
	unix  int64
	value []string
}

var lastDate atomic.Pointer[stampedDate]

// dateHeader is now's Date as net/http writes it; another second is stored anew.
func dateHeader(now time.Time) []string {
	sec := now.Unix()
	if d := lastDate.Load(); d != nil && d.unix == sec {
		return d.value
	}
	d := &stampedDate{unix: sec, value: []string{now.UTC().Format(http.TimeFormat)}}
	lastDate.Store(d)
	return d.value
}

// wantsEnglish: the client's most preferred Accept-Language (by q, the first on a tie) is English.
func wantsEnglish(r *http.Request) bool {
	best, bestQ := "", -1.0
	for part := range strings.SplitSeq(firstHeader(r, "Accept-Language"), ",") {
		tag, params, _ := strings.Cut(part, ";")
		q := 1.0
		if p := strings.TrimSpace(params); strings.HasPrefix(p, "q=") {
			if f, err := strconv.ParseFloat(p[2:], 64); err == nil {
				q = f
			}
		}
		if q > bestQ {
			best, bestQ = strings.TrimSpace(tag), q
		}
	}
	primary, _, _ := strings.Cut(strings.ToLower(best), "-")
	return primary == "en"
}

// decodeJSON reads exactly one JSON object into dst (a pointer to a request struct), refusing other
// media types, unknown fields, trailing data and bodies over the limit, each saying what to fix.
func decodeJSON(r *http.Request, dst any) error {
	// Also catches an empty body sent without a type, which requireJSON passes.
	if err := checkJSONType(r); err != nil {
		return err
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return jsonError(err)
	}
	if err := checkKeys(data, reflect.TypeOf(dst).Elem(), ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return badRequest("request body must hold exactly one JSON value")
	}
	return nil
}

// checkKeys refuses what encoding/json would accept in an object of struct type st or its struct fields
// (named by path): a key twice, one matching a field only by case ({"STOCK":1}); bad JSON is the decoder's.
func checkKeys(data []byte, st reflect.Type, prefix string) error {
	fields := jsonFields(st)
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		ft, known := fields[key]
		switch {
		case seen[key]:
			return badRequest(fmt.Sprintf("duplicate field %q", prefix+key))
		case !known:
			for f := range fields {
				if strings.EqualFold(f, key) {
					return badRequest(fmt.Sprintf("unknown field %q (field names are case-sensitive: did you mean %q?)", prefix+key, prefix+f))
				}
			}
			return badRequest(fmt.Sprintf("unknown field %q", prefix+key))
		}
		seen[key] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			if err := checkKeys(value, ft, prefix+key+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields are the JSON names of struct type st's fields, with their types.
func jsonFields(st reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type, st.NumField())
	for sf := range st.Fields() {
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = sf.Name
		}
		fields[name] = sf.Type
	}
	return fields
}

// jsonError explains a decoding failure (an unknown field by its message prefix).
func jsonError(err error) error {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		ute *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return errBodyTooLarge(mbe.Limit)
	case errors.Is(err, io.EOF):
		return badRequest("request body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("request body is truncated JSON")
	case errors.As(err, &se):
		return badRequest(fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, se.Error()))
	case errors.As(err, &ute):
		if ute.Field == "" {
			return badRequest("request body must be a JSON object")
		}
		return badRequest(fmt.Sprintf("%s must be %s, got %s", ute.Field, kindName(ute.Type), ute.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest(strings.TrimPrefix(err.Error(), "json: "))
	}
	return badRequest("malformed JSON")
}

func kindName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("an integer that fits %d bits", t.Bits())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Pointer:
		return kindName(t.Elem())
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another type" // never a Go type's name: the client sees it
}

// handle adapts an endpoint that returns its error, which fail answers.
func (a *api) handle(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			a.fail(w, r, err)
		}
	}
}

// withID adapts an endpoint of the path parameter name, a positive int64 in decimal digits only.
func (a *api) withID(name string, h func(http.ResponseWriter, *http.Request, int64) error) http.HandlerFunc {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		s := chi.URLParam(r, name)
		n, err := strconv.ParseInt(s, 10, 64)
		switch {
		case allDigits(s) && errors.Is(err, strconv.ErrRange):
			return badRequest(name + " is out of range (max 9223372036854775807)")
		case !allDigits(s) || err != nil || n <= 0:
			return badRequest(name + " must be a positive integer")
		}
		return h(w, r, n)
	})
}

// allDigits: s is decimal digits only, or empty (ParseInt takes a sign).
func allDigits(s string) bool {
	return !strings.ContainsFunc(s, func(c rune) bool { return c < '0' || c > '9' })
}
