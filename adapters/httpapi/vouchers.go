package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

const idempotencyKeyHeader = "Idempotency-Key"

// localLayout is the original's zone-less LocalDateTime format.
const localLayout = "2006-01-02T15:04:05"

// A sale's times are within [minTime, maxTime): MariaDB stops at year 9999,
// and an offset can push 9999-12-31 past it (a 500, not a 400).
var (
	minTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// addVoucherRequest is the original's Voucher JSON as its admin page posts it,
// plus the sale's options; pointers tell "missing" from zero.
type addVoucherRequest struct {
	ShopID       int64               `json:"shopId"`
	Title        string              `json:"title"`
	SubTitle     string              `json:"subTitle"`
	Rules        string              `json:"rules"`
	PayValue     int64               `json:"payValue"`
	ActualValue  int64               `json:"actualValue"`
	Type         *int                `json:"type"`
	Stock        *int                `json:"stock"`
	BeginTime    string              `json:"beginTime"`
	EndTime      string              `json:"endTime"`
	Buckets      *int                `json:"buckets"`      // Redis shards of the stock
	LimitPerUser *int                `json:"limitPerUser"` // orders one user may hold
	WaitingRoom  *waitingRoomRequest `json:"waitingRoom"`
}

// voucherDTO is a voucher as the original's /voucher/list returns it, the id
// a string like every id here; sale fields are omitted for normal vouchers.
type voucherDTO struct {
	ID           string          `json:"id"`
	ShopID       int64           `json:"shopId"`
	Title        string          `json:"title"`
	SubTitle     string          `json:"subTitle"`
	Rules        string          `json:"rules"`
	PayValue     int64           `json:"payValue"`
	ActualValue  int64           `json:"actualValue"`
	Type         int8            `json:"type"`
	Status       int8            `json:"status"`
	Stock        *int            `json:"stock,omitempty"`
	BeginTime    string          `json:"beginTime,omitempty"`
	EndTime      string          `json:"endTime,omitempty"`
	LimitPerUser int             `json:"limitPerUser,omitempty"`
	WaitingRoom  *waitingRoomDTO `json:"waitingRoom,omitempty"`
}

func (a *api) addSeckillVoucher(w http.ResponseWriter, r *http.Request) error {
	var req addVoucherRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	v, err := a.voucherFrom(req)
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

func (a *api) voucherFrom(req addVoucherRequest) (domain.Voucher, error) {
	if req.Type != nil && *req.Type != int(domain.VoucherSeckill) {
		return domain.Voucher{}, &domain.ValidationError{Field: "type", Reason: "must be 1 (seckill) on this endpoint"}
	}
	if req.Stock == nil {
		return domain.Voucher{}, &domain.ValidationError{Field: "stock", Reason: "is required"}
	}
	begin, err := a.parseTime("beginTime", req.BeginTime)
	if err != nil {
		return domain.Voucher{}, err
	}
	end, err := a.parseTime("endTime", req.EndTime)
	if err != nil {
		return domain.Voucher{}, err
	}
	sale, err := domain.NewSaleAt(a.Clock.Now(), *req.Stock, begin, end)
	if err != nil {
		return domain.Voucher{}, err
	}
	if req.Buckets != nil {
		if sale, err = sale.WithBuckets(*req.Buckets); err != nil {
			return domain.Voucher{}, err
		}
	} else if r := a.Split; r.Above > 0 && r.Into > 1 && sale.Stock() > r.Above {
		if sale, err = sale.WithBuckets(min(r.Into, sale.Stock(), domain.MaxBuckets)); err != nil {
			return domain.Voucher{}, err
		}
	}
	if req.LimitPerUser != nil {
		if sale, err = sale.WithLimitPerUser(*req.LimitPerUser); err != nil {
			return domain.Voucher{}, err
		}
	}
	if req.WaitingRoom != nil {
		rules, err := a.roomRules(req.WaitingRoom)
		if err != nil {
			return domain.Voucher{}, err
		}
		if sale, err = sale.WithRoom(a.Clock.Now(), rules); err != nil {
			return domain.Voucher{}, err
		}
	}
	return domain.NewSeckillVoucher(domain.VoucherSpec{
		ShopID:      domain.ShopID(req.ShopID),
		Title:       req.Title,
		SubTitle:    req.SubTitle,
		Rules:       req.Rules,
		PayValue:    req.PayValue,
		ActualValue: req.ActualValue,
	}, sale)
}

// parseTime reads the original's zone-less format in the configured zone, and
// RFC 3339 with an explicit offset (fractional seconds allowed in both).
func (a *api) parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, &domain.ValidationError{Field: field, Reason: "is required"}
	}
	t, err := time.ParseInLocation(localLayout, s, a.Location)
	if err != nil {
		t, err = time.Parse(time.RFC3339, s)
	}
	if err == nil {
		if t.Before(minTime) || !t.Before(maxTime) {
			return time.Time{}, &domain.ValidationError{
				Field:  field,
				Reason: fmt.Sprintf("must be within 2000-01-01 and 2100-01-01 (UTC), got %s", t.UTC().Format(time.RFC3339)),
			}
		}
		return t, nil
	}
	return time.Time{}, &domain.ValidationError{
		Field:  field,
		Reason: "must look like 2026-11-29T20:00:00 (server zone) or 2026-11-29T20:00:00+08:00",
	}
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
		ID:          strconv.FormatInt(int64(v.ID()), 10),
		ShopID:      int64(v.ShopID()),
		Title:       v.Title(),
		SubTitle:    v.SubTitle(),
		Rules:       v.Rules(),
		PayValue:    v.PayValue(),
		ActualValue: v.ActualValue(),
		Type:        int8(v.Type()),
		Status:      v.Status(),
	}
	if v.IsSeckill() {
		s := v.Sale()
		stock := s.Stock()
		d.Stock = &stock
		d.BeginTime = s.Begin().In(a.Location).Format(localLayout)
		d.EndTime = s.End().In(a.Location).Format(localLayout)
		d.LimitPerUser = s.LimitPerUser()
		if s.HasRoom() {
			r := s.Room()
			d.WaitingRoom = &waitingRoomDTO{
				OpensBeforeSeconds: int64(r.OpensBefore() / time.Second), AdmitPerSecond: r.AdmitPerSecond(),
				PassTTLSeconds: int64(r.PassTTL() / time.Second), Margin: r.Margin(),
			}
		}
	}
	return d
}
