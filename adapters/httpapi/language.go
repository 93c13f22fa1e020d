package httpapi

import (
	"net/http"
	"strconv"
	"strings"
)

// The original front end shows errorMsg verbatim, in Chinese; a client that
// asks for English (Accept-Language whose preferred language is en) gets the
// same answer with an English errorMsg. Codes never change.

// englishText is every Chinese errorMsg in English;
// TestEveryAnswerSpeaksBothLanguages holds every answer to it.
var englishText = map[string]string{
	"库存不足":        "Sold out",
	"不能重复下单":      "You already hold as many orders of this voucher as one user may",
	"秒杀尚未开始":      "The sale has not started yet",
	"秒杀已经结束":      "The sale has ended",
	"秒杀已暂停，请稍后再试": "The sale is paused; try again later",
	"优惠券不存在":      "Voucher not found",
	"该秒杀需要排队：请先进入等候室，轮到您后再抢购": "This sale has a waiting room: join it, and buy when your turn comes",
	"您的抢购资格已过期，名额已让给后面排队的用户":  "Your pass has expired; your place went to the next in line",
	"该优惠券没有等候室":               "This voucher has no waiting room",
	"等候室尚未开放":                 "The waiting room is not open yet",
	"您不在该等候室中，请先加入排队":         "You are not in this waiting room: join it first",
	"订单不存在": "Order not found",
	"系统繁忙，下单结果未知，请稍后查询订单": "Busy: whether your order was taken is not known yet; look the order up in a moment",
	"未登录或登录已过期":           "Not logged in, or the login has expired",
	"没有权限：需要管理员账号":        "Forbidden: an admin account is needed",
	"请求过于频繁，请稍后重试":        "Too many requests; try again shortly",
	"系统繁忙，请稍后重试":          "Busy; nothing was taken, try again shortly",
	"服务器异常":               "Server error",
	"订单已支付，不能取消":          "The order is paid and cannot be cancelled",
	"接口不存在":               "No such endpoint",
	"不支持该请求方法":            "Method not allowed",
}

// inEnglish is msg's English; a message already in English is itself.
func inEnglish(msg string) string {
	if en, ok := englishText[msg]; ok {
		return en
	}
	return msg
}

// wantsEnglish: the language the client prefers most (by q, the first on a
// tie) is English. Read on error paths and the sold-out answer only.
func wantsEnglish(r *http.Request) bool {
	v := r.Header["Accept-Language"]
	if len(v) == 0 {
		return false
	}
	best, bestQ := "", -1.0
	for _, part := range strings.Split(v[0], ",") {
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
