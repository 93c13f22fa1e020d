package httpapi

import (
	"context"
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

// control answers a sale control: the voucher the path names, changed by
// do on behalf of the admin making the request, answered as it is left.
func (a *api) control(w http.ResponseWriter, r *http.Request,
	do func(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error),
) {
	id, err := pathID(r, "id")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v, err := do(r.Context(), userFrom(r.Context()), domain.VoucherID(id))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// The shop's list shows the new stock and end here at once.
	a.lists.forget(strconv.FormatInt(int64(v.ShopID()), 10))
	s := v.Sale()
	writeOK(w, saleStateDTO{ID: strconv.FormatInt(int64(v.ID()), 10), Stock: s.Stock(),
		BeginTime: s.Begin().UTC().Format(time.RFC3339Nano), EndTime: s.End().UTC().Format(time.RFC3339Nano),
		Paused: s.Paused(), Added: s.Added()})
}

// endSale: POST /admin/vouchers/{id}/end; pauseSale: .../pause;
// resumeSale: .../resume.
func (a *api) endSale(w http.ResponseWriter, r *http.Request)    { a.control(w, r, a.Controls.EndNow) }
func (a *api) pauseSale(w http.ResponseWriter, r *http.Request)  { a.control(w, r, a.Controls.Pause) }
func (a *api) resumeSale(w http.ResponseWriter, r *http.Request) { a.control(w, r, a.Controls.Resume) }

type endTimeRequest struct {
	EndTime string `json:"endTime"`
}

// moveSaleEnd: PUT /admin/vouchers/{id}/end-time {"endTime": RFC 3339}.
func (a *api) moveSaleEnd(w http.ResponseWriter, r *http.Request) {
	a.control(w, r, func(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error) {
		var req endTimeRequest
		if err := decodeJSON(r, &req); err != nil {
			return domain.Voucher{}, err
		}
		end, err := a.parseTime("endTime", req.EndTime)
		if err != nil {
			return domain.Voucher{}, err
		}
		return a.Controls.MoveEnd(ctx, admin, id, end)
	})
}

type addStockRequest struct {
	Add *int `json:"add"`
}

// addSaleStock: POST /admin/vouchers/{id}/stock {"add": n}.
func (a *api) addSaleStock(w http.ResponseWriter, r *http.Request) {
	a.control(w, r, func(ctx context.Context, admin domain.UserID, id domain.VoucherID) (domain.Voucher, error) {
		var req addStockRequest
		if err := decodeJSON(r, &req); err != nil {
			return domain.Voucher{}, err
		}
		if req.Add == nil {
			return domain.Voucher{}, &domain.ValidationError{Field: "add", Reason: "is required"}
		}
		// An admin's retry after a timeout or a 500 carries the same key
		// and adds nothing more.
		return a.Controls.AddStock(ctx, admin, id, *req.Add, r.Header.Get(idempotencyKeyHeader))
	})
}
