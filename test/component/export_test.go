package component_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// exportOrders is the size of the sale the export is proven on.
const exportOrders = 100_000

// heapWatch is the database's SaleOrders, measuring the live heap (after a
// collection) once each page is read: the most the export ever held.
type heapWatch struct {
	ports.SaleOrders
	mu     sync.Mutex
	limits []int
	peak   uint64
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func (h *heapWatch) OrdersAfter(ctx context.Context, v domain.VoucherID, f domain.OrderFilter, after domain.OrderID, limit int) ([]domain.OrderStatus, error) {
	page, err := h.SaleOrders.OrdersAfter(ctx, v, f, after, limit)
	// The new page is live here, and so would be any earlier one the
	// export still held.
	held := liveHeap()
	h.mu.Lock()
	h.limits = append(h.limits, limit)
	h.peak = max(h.peak, held)
	h.mu.Unlock()
	return page, err
}

// countingWriter is a client that reads the answer and keeps only its
// size and line count (a recorder would keep the whole file in memory).
type countingWriter struct {
	header http.Header
	status int
	bytes  int
	lines  int
	head   []byte
}

func (w *countingWriter) Header() http.Header { return w.header }
func (w *countingWriter) WriteHeader(s int)   { w.status = s }
func (w *countingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if len(w.head) < 200 {
		w.head = append(w.head, b[:min(len(b), 200-len(w.head))]...)
	}
	w.bytes += len(b)
	w.lines += bytes.Count(b, []byte{'\n'})
	return len(b), nil
}

// insertSale writes n orders of one sale straight into tb_voucher_order,
// a thousand rows per INSERT: unpaid, paid, expired and refunding ones.
func insertSale(t *testing.T, db *bun.DB, voucher domain.VoucherID, n int) {
	t.Helper()
	ctx := context.Background()
	at := testenv.Now().Add(-time.Hour)
	deadline := at.Add(15 * time.Minute).UTC().Format("2006-01-02 15:04:05")
	var b bytes.Buffer
	for start := 0; start < n; start += 1000 {
		b.Reset()
		b.WriteString("INSERT INTO tb_voucher_order (id, user_id, voucher_id, status, pay_deadline, cancel_reason, pay_time) VALUES ")
		for i := start; i < min(start+1000, n); i++ {
			id, err := domain.NewOrderID(at, uint32(i+1))
			if err != nil {
				t.Fatal(err)
			}
			if i > start {
				b.WriteString(", ")
			}
			status, reason, paid := 1, "NULL", "NULL"
			switch i % 10 {
			case 6, 7:
				status, paid = 2, "'"+deadline+"'"
			case 8:
				status, reason = 4, "'expired'"
			case 9:
				status, reason, paid = 5, "'expired'", "'"+deadline+"'"
			}
			fmt.Fprintf(&b, "(%d, %d, %d, %d, '%s', %s, %s)", int64(id), i+1, int64(voucher), status, deadline, reason, paid)
		}
		if _, err := db.ExecContext(ctx, b.String()); err != nil {
			t.Fatalf("insert orders %d..: %v", start, err)
		}
	}
}

// TestSaleExportOf100kOrdersHoldsOnePage: the CSV export of a sale of
// 100,000 orders asks the database for pages of 1000, writes every order,
// and its live heap never grows by more than a fraction of what the sale's
// orders cost held at once, on SQLite and on MySQL.
func TestSaleExportOf100kOrdersHoldsOnePage(t *testing.T) {
	backends := []struct {
		name string
		open func(t *testing.T) *bun.DB
	}{
		{"sqlite", func(t *testing.T) *bun.DB {
			db, err := mysqlstore.OpenSQLite(testenv.SQLitePath(t))
			if err != nil {
				t.Fatal(err)
			}
			return db
		}},
		{"mysql", func(t *testing.T) *bun.DB {
			db, err := mysqlstore.OpenMySQL(testenv.MySQLDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			return db
		}},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			db := be.open(t)
			t.Cleanup(func() { _ = db.Close() })
			ctx := context.Background()
			if _, err := mysqlstore.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			begin := testenv.Now().Add(-2 * time.Hour)
			v, err := mysqlstore.NewVoucherRepo(db).AddSeckill(ctx,
				testenv.SeckillVoucher(t, domain.VoucherSpec{ShopID: 1, Title: "big"}, exportOrders, begin, begin.Add(4*time.Hour)))
			if err != nil {
				t.Fatal(err)
			}
			insertSale(t, db, v.ID(), exportOrders)

			orders := mysqlstore.NewOrderRepo(db)
			watch := &heapWatch{SaleOrders: orders}
			h, admin := exportRouter(t, db, watch)

			// What the sale's orders cost held at once, for scale.
			base := liveHeap()
			all, err := orders.OrdersAfter(ctx, v.ID(), domain.AllOrders, 0, exportOrders)
			whole := liveHeap() - base
			if err != nil || len(all) != exportOrders {
				t.Fatalf("read the whole sale: %d orders, %v", len(all), err)
			}
			runtime.KeepAlive(all) // live until measured
			all = nil

			w := &countingWriter{header: http.Header{}}
			r := httptest.NewRequest("GET", "/admin/vouchers/"+strconv.FormatInt(int64(v.ID()), 10)+"/orders.csv", nil)
			r.Header.Set("authorization", admin)
			base = liveHeap()
			h.ServeHTTP(w, r)
			if w.status != http.StatusOK || w.lines != exportOrders+1 {
				t.Fatalf("export: %d, %d lines (%d bytes), want %d: %s", w.status, w.lines, w.bytes, exportOrders+1, w.head)
			}
			grew := int64(watch.peak) - int64(base)
			t.Logf("%d orders, %d bytes of CSV in %d reads; live heap grew by at most %d KiB while exporting; the sale held at once: %d KiB",
				exportOrders, w.bytes, len(watch.limits), grew/1024, whole/1024)
			if len(watch.limits) != exportOrders/application.ExportPage+1 {
				t.Fatalf("%d reads, want %d pages of %d and the empty one that ends them", len(watch.limits), exportOrders/application.ExportPage+1, application.ExportPage)
			}
			for _, l := range watch.limits {
				if l != application.ExportPage {
					t.Fatalf("a read asked for %d orders, want %d", l, application.ExportPage)
				}
			}
			if grew > int64(whole)/10 {
				t.Fatalf("the export's live heap grew by %d KiB, over a tenth of the whole sale's %d KiB", grew/1024, whole/1024)
			}
		})
	}
}

// exportRouter is the API over db's repositories for the operator's reads,
// the memory fakes for the rest, and an admin's token.
func exportRouter(t *testing.T, db *bun.DB, orders ports.SaleOrders) (http.Handler, string) {
	t.Helper()
	clock := testenv.NewClock(testenv.Now())
	mv := memory.NewVouchers()
	mo := memory.NewOrders(mv)
	gate := memory.NewGate(clock)
	queue := chanqueue.New(16, 0)
	t.Cleanup(func() { _ = queue.Close() })
	sessions := memory.NewSessions()
	const admin = 1
	token, err := sessions.Mint(context.Background(), admin)
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.NewRouter(httpapi.Deps{
		AddVoucher:   application.NewAddSeckillVoucher(mv, mo, gate),
		ListVouchers: application.NewListShopVouchers(mv),
		Claim:        application.NewClaimSeckill(memory.NewIDs(clock), chanqueue.NewAdmission(gate, queue)),
		GetOrder:     application.NewGetOrder(mo, gate),
		Sessions:     sessions,
		Ready:        func(context.Context) error { return nil },
		Admins:       []domain.UserID{admin},
		Orders:       application.NewListSaleOrders(mysqlstore.NewVoucherRepo(db), orders),
	})
	return h, token
}
