package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

// saleStateDTO is a sale as a control leaves it: what an admin checks
// after changing it.
type saleStateDTO struct {
	ID        string `json:"id"`
	Stock     int    `json:"stock"`
	BeginTime string `json:"beginTime"`
	EndTime   string `json:"endTime"`
	Paused    bool   `json:"paused"`
	// Added is every unit admins added since the sale was created.
	Added int `json:"added"`
}

func toSaleStateDTO(v domain.Voucher) saleStateDTO {
	s := v.Sale()
	return saleStateDTO{ID: strconv.FormatInt(int64(v.ID()), 10), Stock: s.Stock(),
		BeginTime: s.Begin().UTC().Format(time.RFC3339Nano), EndTime: s.End().UTC().Format(time.RFC3339Nano),
		Paused: s.Paused(), Added: s.Added()}
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
	v, err := a.Controls.EndNow(r.Context(), userFrom(r.Context()), domain.VoucherID(id))
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
	v, err := a.Controls.MoveEnd(r.Context(), userFrom(r.Context()), domain.VoucherID(id), end)
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

type addStockRequest struct {
	Add *int `json:"add"`
}

// addSaleStock: POST /admin/vouchers/{id}/stock {"add": n}.
func (a *api) addSaleStock(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "id")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var req addStockRequest
	if err := decodeJSON(r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	if req.Add == nil {
		a.fail(w, r, &domain.ValidationError{Field: "add", Reason: "is required"})
		return
	}
	// An admin's retry after a timeout or a 500 carries the same key and
	// adds nothing more.
	v, err := a.Controls.AddStock(r.Context(), userFrom(r.Context()), domain.VoucherID(id), *req.Add, r.Header.Get(idempotencyKeyHeader))
	a.answerControl(w, r, v, err)
}

// pauseSale: POST /admin/vouchers/{id}/pause; resumeSale: .../resume.
func (a *api) pauseSale(w http.ResponseWriter, r *http.Request)  { a.setPaused(w, r, true) }
func (a *api) resumeSale(w http.ResponseWriter, r *http.Request) { a.setPaused(w, r, false) }

func (a *api) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	id, err := pathID(r, "id")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	h := a.Controls.Resume
	if paused {
		h = a.Controls.Pause
	}
	v, err := h(r.Context(), userFrom(r.Context()), domain.VoucherID(id))
	a.answerControl(w, r, v, err)
}
