package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

// saleStateDTO is a sale as a control leaves it: what an admin checks
// after ending it or moving its end.
type saleStateDTO struct {
	ID        string `json:"id"`
	Stock     int    `json:"stock"`
	BeginTime string `json:"beginTime"`
	EndTime   string `json:"endTime"`
}

func toSaleStateDTO(v domain.Voucher) saleStateDTO {
	s := v.Sale()
	return saleStateDTO{ID: strconv.FormatInt(int64(v.ID()), 10), Stock: s.Stock(),
		BeginTime: s.Begin().UTC().Format(time.RFC3339Nano), EndTime: s.End().UTC().Format(time.RFC3339Nano)}
}

type endTimeRequest struct {
	EndTime string `json:"endTime"`
}

// endSale: POST /admin/vouchers/{id}/end.
func (a *api) endSale(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "id")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v, err := a.controls.EndNow(r.Context(), userFrom(r.Context()), domain.VoucherID(id))
	a.answerControl(w, r, v, err)
}

// moveSaleEnd: PUT /admin/vouchers/{id}/end-time {"endTime": RFC 3339}.
func (a *api) moveSaleEnd(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "id")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var req endTimeRequest
	if err := decodeJSON(r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	end, err := a.parseTime("endTime", req.EndTime)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v, err := a.controls.MoveEnd(r.Context(), userFrom(r.Context()), domain.VoucherID(id), end)
	a.answerControl(w, r, v, err)
}

func (a *api) answerControl(w http.ResponseWriter, r *http.Request, v domain.Voucher, err error) {
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// The shop's list shows the new stock and end here at once.
	a.lists.forget(strconv.FormatInt(int64(v.ShopID()), 10))
	writeOK(w, toSaleStateDTO(v))
}
