package contract_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// listAll is a cap on ListByShop above any list these cases make.
const listAll = 1000

// repoSubject is one fresh, empty store behind both repository ports.
type repoSubject struct {
	vouchers ports.VoucherRepository
	orders   ports.OrderRepository
	// addNormal stores a voucher without a sale; the service never creates
	// one, but the original's data has them and listings must show them.
	addNormal func(t *testing.T, spec domain.VoucherSpec) domain.VoucherID
	// db is the SQL database behind the repositories (nil for memory).
	db *bun.DB
	// audit is the trail the voucher repository's creations append to.
	audit ports.AuditLog
}

type repoBackend struct {
	name string
	// open checks the backend once (it may skip) and returns a factory of
	// fresh, empty subjects, one per case.
	open func(t *testing.T) func(t *testing.T) repoSubject
}

func repoBackends() []repoBackend {
	return []repoBackend{
		{name: "memory", open: func(*testing.T) func(*testing.T) repoSubject {
			return repoMemorySubject
		}},
		{name: "sqlite", open: func(*testing.T) func(*testing.T) repoSubject {
			return func(t *testing.T) repoSubject {
				return repoSQLSubject(t, repoOpenSQLite(t, testenv.SQLitePath(t)))
			}
		}},
		{name: "mysql", open: func(t *testing.T) func(*testing.T) repoSubject {
			testenv.MySQLDSN(t) // skips here, once, when no server is named
			return func(t *testing.T) repoSubject {
				return repoSQLSubject(t, repoOpenMySQL(t, testenv.MySQLDSN(t)))
			}
		}},
	}
}

func repoMemorySubject(*testing.T) repoSubject {
	v := memory.NewVouchers()
	return repoSubject{
		vouchers: v,
		orders:   memory.NewOrders(v),
		audit:    memory.NewAuditLog(v),
		addNormal: func(t *testing.T, spec domain.VoucherSpec) domain.VoucherID {
			saved, err := v.AddNormal(repoCtx(t), spec)
			if err != nil {
				t.Fatalf("add normal voucher: %v", err)
			}
			return saved.ID()
		},
	}
}

func repoOpenSQLite(t *testing.T, path string) *bun.DB {
	t.Helper()
	db, err := mysqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatalf("open SQLite: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func repoOpenMySQL(t *testing.T, dsn string) *bun.DB {
	t.Helper()
	db, err := mysqlstore.OpenMySQL(dsn)
	if err != nil {
		t.Fatalf("open MySQL: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func repoSQLSubject(t *testing.T, db *bun.DB) repoSubject {
	t.Helper()
	if _, err := mysqlstore.Migrate(repoCtx(t), db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return repoSubject{
		vouchers: mysqlstore.NewVoucherRepo(db),
		orders:   mysqlstore.NewOrderRepo(db),
		audit:    mysqlstore.NewAuditRepo(db),
		db:       db,
		addNormal: func(t *testing.T, spec domain.VoucherSpec) domain.VoucherID {
			t.Helper()
			// Written as the original's admin tools wrote it: a tb_voucher
			// row of type 0 and no tb_seckill_voucher row.
			res, err := db.ExecContext(repoCtx(t),
				"INSERT INTO tb_voucher (shop_id, title, sub_title, rules, pay_value, actual_value, type, status) VALUES (?, ?, ?, ?, ?, ?, 0, 1)",
				int64(spec.ShopID), spec.Title, spec.SubTitle, spec.Rules, spec.PayValue, spec.ActualValue)
			if err != nil {
				t.Fatalf("insert normal voucher: %v", err)
			}
			id, err := res.LastInsertId()
			if err != nil {
				t.Fatalf("insert normal voucher: %v", err)
			}
			return domain.VoucherID(id)
		},
	}
}

func repoCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// repoZone is not UTC, so a repository that stored wall-clock times as given
// would be caught.
var repoZone = time.FixedZone("UTC+8", 8*60*60)

func repoAdd(t *testing.T, s repoSubject, shop domain.ShopID, stock int) domain.Voucher {
	t.Helper()
	begin := testenv.Now().In(repoZone)
	return repoAddSale(t, s, domain.VoucherSpec{ShopID: shop, Title: "seckill", PayValue: 8000, ActualValue: 10000},
		stock, begin, begin.Add(2*time.Hour))
}

func repoAddSale(t *testing.T, s repoSubject, spec domain.VoucherSpec, stock int, begin, end time.Time) domain.Voucher {
	t.Helper()
	v := testenv.SeckillVoucher(t, spec, stock, begin, end)
	saved, err := s.vouchers.AddSeckill(repoCtx(t), v)
	if err != nil {
		t.Fatalf("add seckill voucher: %v", err)
	}
	if saved.ID() <= 0 {
		t.Fatalf("add seckill voucher: got id %d", saved.ID())
	}
	return saved
}

func repoGet(t *testing.T, s repoSubject, id domain.VoucherID) domain.Voucher {
	t.Helper()
	v, err := s.vouchers.Get(repoCtx(t), id)
	if err != nil {
		t.Fatalf("get voucher %d: %v", id, err)
	}
	return v
}

func repoStock(t *testing.T, s repoSubject, id domain.VoucherID, want int) {
	t.Helper()
	if got := repoGet(t, s, id).Sale().Stock(); got != want {
		t.Fatalf("stock of voucher %d: got %d, want %d", id, got, want)
	}
}

func repoBatch(t *testing.T, s repoSubject, orders ...domain.VoucherOrder) []ports.Outcome {
	t.Helper()
	out, err := s.orders.CreateBatch(repoCtx(t), orders)
	if err != nil {
		t.Fatalf("create batch: %v", err)
	}
	if len(out) != len(orders) {
		t.Fatalf("create batch of %d: got %d outcomes", len(orders), len(out))
	}
	return out
}

// repoExpect checks outcomes against expectations written compactly: "created", "created
// again" (New=false), or a failure reason, optionally with " again".
func repoExpect(t *testing.T, got []ports.Outcome, orders []domain.VoucherOrder, want ...string) {
	t.Helper()
	for i, o := range got {
		if o.Order != orders[i] {
			t.Errorf("outcome %d is for %s, want %s (outcomes must follow the input order)", i, o.Order, orders[i])
		}
		desc, again := strings.CutSuffix(want[i], " again")
		wantOut := ports.Outcome{Order: orders[i], State: domain.OrderCreated, New: !again}
		if desc != "created" {
			wantOut.State, wantOut.Reason = domain.OrderFailed, domain.FailureReason(desc)
		}
		if o != wantOut {
			t.Errorf("outcome %d (%s): got %s, want %s", i, orders[i], repoShow(o), repoShow(wantOut))
		}
	}
}

func repoShow(o ports.Outcome) string {
	s := string(o.State)
	if o.Reason != "" {
		s += " " + string(o.Reason)
	}
	if !o.New {
		s += " again"
	}
	return s
}

func repoFind(t *testing.T, s repoSubject, id domain.OrderID) (domain.OrderStatus, error) {
	t.Helper()
	st, err := s.orders.Find(repoCtx(t), id)
	if err != nil && !errors.Is(err, domain.ErrOrderNotFound) {
		t.Fatalf("find order %d: %v", id, err)
	}
	return st, err
}

func repoFound(t *testing.T, s repoSubject, o domain.VoucherOrder, state domain.OrderState, reason domain.FailureReason) {
	t.Helper()
	st, err := repoFind(t, s, o.ID())
	if err != nil {
		t.Fatalf("find %s: %v", o, err)
	}
	want := domain.OrderStatus{Order: o, State: state, Reason: reason}
	if st != want {
		t.Fatalf("find %s: got %+v, want %+v", o, st, want)
	}
}

func repoBuyers(t *testing.T, s repoSubject, voucher domain.VoucherID, want ...domain.VoucherOrder) {
	t.Helper()
	got, err := s.orders.Buyers(repoCtx(t), voucher)
	if err != nil {
		t.Fatalf("buyers of voucher %d: %v", voucher, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("buyers of voucher %d:\n got %v\nwant %v", voucher, got, want)
	}
}

func repoSameVoucher(t *testing.T, got, want domain.Voucher) {
	t.Helper()
	type flat struct {
		ID                     domain.VoucherID
		Shop                   domain.ShopID
		Title, SubTitle, Rules string
		Pay, Actual            int64
		Type                   domain.VoucherType
		Status                 int8
		Seckill                bool
		Stock                  int
		Buckets                int
	}
	f := func(v domain.Voucher) flat {
		return flat{v.ID(), v.ShopID(), v.Title(), v.SubTitle(), v.Rules(), v.PayValue(), v.ActualValue(),
			v.Type(), v.Status(), v.IsSeckill(), v.Sale().Stock(), v.Sale().Buckets()}
	}
	if f(got) != f(want) {
		t.Fatalf("voucher:\n got %+v\nwant %+v", f(got), f(want))
	}
	gs, ws := got.Sale(), want.Sale()
	if !gs.Begin().Equal(ws.Begin()) || !gs.End().Equal(ws.End()) {
		t.Fatalf("voucher %d window: got [%s, %s), want [%s, %s)", got.ID(), gs.Begin(), gs.End(), ws.Begin(), ws.End())
	}
	if got.IsSeckill() && (gs.Begin().Location() != time.UTC || gs.End().Location() != time.UTC) {
		t.Fatalf("voucher %d window comes back in %s/%s, want UTC", got.ID(), gs.Begin().Location(), gs.End().Location())
	}
}

func repoIDs(vs []domain.Voucher) []domain.VoucherID {
	ids := make([]domain.VoucherID, len(vs))
	for i, v := range vs {
		ids[i] = v.ID()
	}
	return ids
}

// repoCase is one case of the repository suite; the cases are spread over
// files by concern (repoCases here, repoReadCases for the repair's reads).
type repoCase struct {
	name string
	run  func(t *testing.T, s repoSubject)
}

var repoCases = []repoCase{
	{"tally_counts_stock_created_and_failed_orders_of_one_voucher", func(t *testing.T, s repoSubject) {
		ledger, ok := s.orders.(ports.OrderLedger)
		if !ok {
			t.Fatalf("%T is not a ports.OrderLedger", s.orders)
		}
		v := repoAdd(t, s, 1, 2)
		other := repoAdd(t, s, 1, 5)
		repoBatch(t, s, testenv.Order(t, 1, 1, v.ID()), testenv.Order(t, 2, 2, v.ID()), testenv.Order(t, 3, 3, v.ID()),
			testenv.Order(t, 4, 1, other.ID()))
		if _, err := s.orders.MarkFailed(repoCtx(t), []domain.VoucherOrder{testenv.Order(t, 5, 5, v.ID())}, domain.FailUndeliverable); err != nil {
			t.Fatal(err)
		}
		got, err := ledger.Tally(repoCtx(t), v.ID())
		if want := (ports.SaleTally{Stock: 0, Failed: 2, Unpaid: 2}); err != nil || got != want {
			t.Fatalf("Tally = %+v, %v; want %+v", got, err, want)
		}
		if got, err := ledger.Tally(repoCtx(t), other.ID()); err != nil || got != (ports.SaleTally{Stock: 4, Unpaid: 1}) {
			t.Fatalf("Tally of the other voucher = %+v, %v", got, err)
		}
		if _, err := ledger.Tally(repoCtx(t), other.ID()+100); !errors.Is(err, domain.ErrVoucherNotFound) {
			t.Fatalf("Tally of an unknown voucher: %v, want ErrVoucherNotFound", err)
		}
	}},

	{"a_split_sale_keeps_its_buckets", func(t *testing.T, s repoSubject) {
		// A restore rebuilds a sale from the repository: a split one must
		// come back split, and an unsplit one as 1.
		begin := testenv.Now().In(repoZone)
		sale, err := domain.NewSale(300, begin, begin.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		split, err := sale.WithBuckets(3)
		if err != nil {
			t.Fatal(err)
		}
		nv, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 9, Title: "split"}, split)
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.vouchers.AddSeckill(repoCtx(t), nv)
		if err != nil {
			t.Fatal(err)
		}
		if v.Sale().Buckets() != 3 {
			t.Fatalf("AddSeckill returned %d buckets, want 3", v.Sale().Buckets())
		}
		repoSameVoucher(t, repoGet(t, s, v.ID()), v)
		live, err := s.vouchers.ListSeckillEndingAfter(repoCtx(t), begin)
		if err != nil || len(live) != 1 || live[0].Sale().Buckets() != 3 {
			t.Fatalf("ListSeckillEndingAfter: %v, %v", live, err)
		}
		whole := repoAdd(t, s, 9, 5)
		if got := repoGet(t, s, whole.ID()).Sale().Buckets(); got != 1 {
			t.Fatalf("an unsplit sale comes back with %d buckets", got)
		}
	}},
	{"a_sale_keeps_its_waiting_room", func(t *testing.T, s repoSubject) {
		// A restore opens a room from what the repository returns.
		begin := testenv.Now().In(repoZone)
		rules, err := domain.NewRoomRules(90*time.Second, 250, 45*time.Second, 7)
		if err != nil {
			t.Fatal(err)
		}
		sale, err := domain.NewSale(30, begin, begin.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		nv, err := domain.NewSeckillVoucher(domain.VoucherSpec{ShopID: 9, Title: "room"}, sale.WithStoredRoom(rules))
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.vouchers.AddSeckill(repoCtx(t), nv)
		if err != nil {
			t.Fatal(err)
		}
		if got := repoGet(t, s, v.ID()).Sale().Room(); got != rules {
			t.Fatalf("Get returned room %+v, want %+v", got, rules)
		}
		live, err := s.vouchers.ListSeckillEndingAfter(repoCtx(t), begin)
		if err != nil || len(live) != 1 || live[0].Sale().Room() != rules {
			t.Fatalf("ListSeckillEndingAfter: %v, %v", live, err)
		}
		if repoGet(t, s, repoAdd(t, s, 9, 5).ID()).Sale().HasRoom() {
			t.Fatal("a sale without a room comes back with one")
		}
	}},
	{"add_get_list_round_trip", func(t *testing.T, s repoSubject) {
		// Sub-microsecond digits and a non-UTC zone: what comes back is the
		// same instant, in UTC, at the precision the database keeps.
		begin := testenv.Now().In(repoZone).Add(123456789)
		end := begin.Add(90 * time.Minute)
		spec := domain.VoucherSpec{
			ShopID:      7,
			Title:       strings.Repeat("秒", 255),
			SubTitle:    "周一至周日均可使用",
			Rules:       strings.Repeat("规", 1024),
			PayValue:    1 << 40,
			ActualValue: 1<<40 + 1,
		}
		first := repoAddSale(t, s, spec, 100, begin, end)
		if got := first.Sale().Begin(); !got.Equal(begin.Truncate(time.Microsecond)) || got.Location() != time.UTC {
			t.Fatalf("AddSeckill returned begin %s, want %s in UTC", got, begin.Truncate(time.Microsecond).UTC())
		}
		repoSameVoucher(t, repoGet(t, s, first.ID()), first)

		normal := s.addNormal(t, domain.VoucherSpec{ShopID: 7, Title: "normal", PayValue: 500, ActualValue: 1000})
		second := repoAdd(t, s, 7, 3)
		other := repoAdd(t, s, 8, 1)
		if !(first.ID() < normal && normal < second.ID() && second.ID() < other.ID()) {
			t.Fatalf("ids not increasing: %d, %d, %d, %d", first.ID(), normal, second.ID(), other.ID())
		}

		list, err := s.vouchers.ListByShop(repoCtx(t), 7, listAll)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := repoIDs(list), []domain.VoucherID{first.ID(), normal, second.ID()}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("list of shop 7: got %v, want %v", got, want)
		}
		repoSameVoucher(t, list[0], first)
		repoSameVoucher(t, list[2], second)
		n := list[1]
		if n.IsSeckill() || !n.Sale().IsZero() || n.Type() != domain.VoucherNormal || n.Title() != "normal" ||
			n.PayValue() != 500 || n.ActualValue() != 1000 || n.ShopID() != 7 || n.SubTitle() != "" {
			t.Fatalf("normal voucher listed as %+v", n)
		}
		repoSameVoucher(t, repoGet(t, s, normal), n)

		list, err = s.vouchers.ListByShop(repoCtx(t), 8, listAll)
		if err != nil || len(list) != 1 || list[0].ID() != other.ID() {
			t.Fatalf("list of shop 8: got %v (err %v), want [%d]", repoIDs(list), err, other.ID())
		}
		list, err = s.vouchers.ListByShop(repoCtx(t), 404, listAll)
		if err != nil || len(list) != 0 {
			t.Fatalf("list of an unknown shop: got %v (err %v), want none", repoIDs(list), err)
		}
		// Over the cap: the newest, still in id order.
		list, err = s.vouchers.ListByShop(repoCtx(t), 7, 2)
		if got, want := repoIDs(list), []domain.VoucherID{normal, second.ID()}; err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("list of shop 7 capped at 2: got %v (err %v), want %v", got, err, want)
		}
	}},
	{"mark_failed_keeps_recorded_outcomes_and_is_idempotent", func(t *testing.T, s repoSubject) {
		v := repoAdd(t, s, 1, 5).ID()
		created := testenv.Order(t, 101, 1, v)
		repoBatch(t, s, created)
		repoExpect(t, repoBatch(t, s, testenv.Order(t, 103, 1, v)), []domain.VoucherOrder{testenv.Order(t, 103, 1, v)}, "duplicate")

		fresh := testenv.Order(t, 104, 3, v)
		conflict := testenv.Order(t, 101, 9, v) // another order's ID
		orders := []domain.VoucherOrder{created, testenv.Order(t, 103, 1, v), fresh, fresh, conflict}
		out, err := s.orders.MarkFailed(repoCtx(t), orders, domain.FailUndeliverable)
		if err != nil {
			t.Fatal(err)
		}
		repoExpect(t, out, orders, "created again", "duplicate again", "undeliverable", "undeliverable again", "id_conflict")
		repoFound(t, s, created, domain.OrderCreated, "")
		repoFound(t, s, fresh, domain.OrderFailed, domain.FailUndeliverable)
		repoStock(t, s, v, 4)

		// Marked failed, it can no longer be created by a late redelivery.
		repoExpect(t, repoBatch(t, s, fresh), []domain.VoucherOrder{fresh}, "undeliverable again")
		repoStock(t, s, v, 4)
	}},
	{"list_seckill_ending_after", func(t *testing.T, s repoSubject) {
		at := testenv.Now().In(repoZone)
		spec := domain.VoucherSpec{ShopID: 1, Title: "window"}
		add := func(end time.Time) domain.VoucherID {
			return repoAddSale(t, s, spec, 1, end.Add(-time.Hour), end).ID()
		}
		add(at.Add(-time.Hour))
		add(at)
		justAfter := add(at.Add(time.Microsecond))
		later := add(at.Add(time.Hour))
		s.addNormal(t, spec)

		got, err := s.vouchers.ListSeckillEndingAfter(repoCtx(t), at.UTC())
		if err != nil {
			t.Fatal(err)
		}
		if want := []domain.VoucherID{justAfter, later}; fmt.Sprint(repoIDs(got)) != fmt.Sprint(want) {
			t.Fatalf("ending after %s: got %v, want %v", at, repoIDs(got), want)
		}
		// The zone of the argument must not matter.
		got, err = s.vouchers.ListSeckillEndingAfter(repoCtx(t), at)
		if err != nil || fmt.Sprint(repoIDs(got)) != fmt.Sprint([]domain.VoucherID{justAfter, later}) {
			t.Fatalf("ending after %s in %s: got %v (err %v)", at, repoZone, repoIDs(got), err)
		}
	}},
	{"not_found", func(t *testing.T, s repoSubject) {
		if _, err := s.vouchers.Get(repoCtx(t), 404); !errors.Is(err, domain.ErrVoucherNotFound) {
			t.Fatalf("get unknown voucher: got %v, want ErrVoucherNotFound", err)
		}
		if _, err := repoFind(t, s, 404); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Fatalf("find unknown order: got %v, want ErrOrderNotFound", err)
		}
		repoBuyers(t, s, 404)
	}},
	{"add_once_returns_the_keys_voucher_even_to_concurrent_retries", func(t *testing.T, s repoSubject) {
		begin := testenv.Now().In(repoZone)
		v := testenv.SeckillVoucher(t, domain.VoucherSpec{ShopID: 9, Title: "once", PayValue: 1, ActualValue: 2}, 5, begin, begin.Add(time.Hour))
		const tries = 8
		results := make([]ports.Creation, tries)
		errs := make([]error, tries)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = s.vouchers.AddSeckillOnce(repoCtx(t), "admin-retry-1", "fp-a", v, auditCreation(t, 7))
			}()
		}
		close(start)
		wg.Wait()
		created := 0
		for i := range tries {
			if errs[i] != nil {
				t.Fatalf("try %d: %v", i, errs[i])
			}
			if results[i].Created {
				created++
			}
			if results[i].Voucher.ID() != results[0].Voucher.ID() || results[i].Fingerprint != "fp-a" {
				t.Fatalf("try %d: voucher %d fingerprint %q, want voucher %d fingerprint fp-a",
					i, results[i].Voucher.ID(), results[i].Fingerprint, results[0].Voucher.ID())
			}
		}
		if created != 1 {
			t.Fatalf("%d tries created a voucher, want exactly 1", created)
		}
		if list, err := s.vouchers.ListByShop(repoCtx(t), 9, listAll); err != nil || len(list) != 1 {
			t.Fatalf("shop 9 lists %v (err %v), want one voucher", repoIDs(list), err)
		}
		other, err := s.vouchers.AddSeckillOnce(repoCtx(t), "admin-retry-2", "fp-a", v, auditCreation(t, 7))
		if err != nil || !other.Created || other.Voucher.ID() == results[0].Voucher.ID() {
			t.Fatalf("another key: %+v, %v; want a new voucher", other, err)
		}
		// One entry per voucher created, however many retries raced.
		for _, id := range []domain.VoucherID{results[0].Voucher.ID(), other.Voucher.ID()} {
			if got := auditOf(t, s, id); len(got) != 1 || got[0].Admin() != 7 {
				t.Fatalf("voucher %d has audit entries %v, want one by admin 7", id, got)
			}
		}
	}},
	{"add_rejects_voucher_without_sale", func(t *testing.T, s repoSubject) {
		_, err := s.vouchers.AddSeckill(repoCtx(t), domain.Voucher{})
		var ve *domain.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("add a voucher without a sale: got %v, want a ValidationError", err)
		}
		list, err := s.vouchers.ListByShop(repoCtx(t), 0, listAll)
		if err != nil || len(list) != 0 {
			t.Fatalf("a refused voucher was stored: %v (err %v)", repoIDs(list), err)
		}
	}},
	{"empty_batch", func(t *testing.T, s repoSubject) {
		out, err := s.orders.CreateBatch(repoCtx(t), nil)
		if err != nil || len(out) != 0 {
			t.Fatalf("empty batch: got %v, %v", out, err)
		}
	}},
	{"batch_creates_and_decrements", func(t *testing.T, s repoSubject) {
		v := repoAdd(t, s, 1, 5)
		orders := []domain.VoucherOrder{testenv.Order(t, 103, 3, v.ID()), testenv.Order(t, 101, 1, v.ID()), testenv.Order(t, 102, 2, v.ID())}
		repoExpect(t, repoBatch(t, s, orders...), orders, "created", "created", "created")
		repoStock(t, s, v.ID(), 2)
		for _, o := range orders {
			repoFound(t, s, o, domain.OrderCreated, "")
		}
		repoBuyers(t, s, v.ID(), orders[1], orders[2], orders[0])
	}},
	{"redelivered_batch_is_a_no_op", func(t *testing.T, s repoSubject) {
		v := repoAdd(t, s, 1, 2)
		orders := []domain.VoucherOrder{testenv.Order(t, 1, 1, v.ID()), testenv.Order(t, 2, 2, v.ID()), testenv.Order(t, 3, 3, v.ID())}
		repoExpect(t, repoBatch(t, s, orders...), orders, "created", "created", "out_of_stock")
		repoExpect(t, repoBatch(t, s, orders...), orders, "created again", "created again", "out_of_stock again")
		// Part of it again, in another order.
		part := []domain.VoucherOrder{orders[2], orders[0]}
		repoExpect(t, repoBatch(t, s, part...), part, "out_of_stock again", "created again")
		repoStock(t, s, v.ID(), 0)
		repoBuyers(t, s, v.ID(), orders[0], orders[1])
		repoFound(t, s, orders[2], domain.OrderFailed, domain.FailOutOfStock)
	}},
	{"redelivery_mixed_with_new_orders_creates_only_the_new", func(t *testing.T, s repoSubject) {
		// A batch whose first insert attempt meets rows that exist (a
		// redelivered order, a user who already holds one) must end as if
		// it had been read first: the new order created once, the stock
		// taken once, nothing of the attempt left behind.
		v := repoAdd(t, s, 1, 5)
		first := testenv.Order(t, 1, 1, v.ID())
		repoExpect(t, repoBatch(t, s, first), []domain.VoucherOrder{first}, "created")
		fresh := testenv.Order(t, 2, 2, v.ID())
		again := testenv.Order(t, 3, 1, v.ID()) // user 1 again, another ID
		orders := []domain.VoucherOrder{fresh, first, again}
		repoExpect(t, repoBatch(t, s, orders...), orders, "created", "created again", "duplicate")
		repoStock(t, s, v.ID(), 3)
		repoBuyers(t, s, v.ID(), first, fresh)
		repoFound(t, s, again, domain.OrderFailed, domain.FailDuplicate)
		late := testenv.Order(t, 4, 4, v.ID())
		repoExpect(t, repoBatch(t, s, late, fresh), []domain.VoucherOrder{late, fresh}, "created", "created again")
		repoStock(t, s, v.ID(), 2)
	}},
	{"duplicate_user_in_later_batch", func(t *testing.T, s repoSubject) {
		v := repoAdd(t, s, 1, 5)
		first := testenv.Order(t, 1, 7, v.ID())
		second := testenv.Order(t, 2, 7, v.ID())
		repoExpect(t, repoBatch(t, s, first), []domain.VoucherOrder{first}, "created")
		repoExpect(t, repoBatch(t, s, second), []domain.VoucherOrder{second}, "duplicate")
		repoExpect(t, repoBatch(t, s, second), []domain.VoucherOrder{second}, "duplicate again")
		repoFound(t, s, second, domain.OrderFailed, domain.FailDuplicate)
		repoFound(t, s, first, domain.OrderCreated, "")
		repoStock(t, s, v.ID(), 4)
		repoBuyers(t, s, v.ID(), first)
	}},
	{"two_orders_of_one_user_in_one_batch", func(t *testing.T, s repoSubject) {
		v := repoAdd(t, s, 1, 5)
		orders := []domain.VoucherOrder{testenv.Order(t, 1, 1, v.ID()), testenv.Order(t, 2, 1, v.ID()), testenv.Order(t, 3, 2, v.ID())}
		repoExpect(t, repoBatch(t, s, orders...), orders, "created", "duplicate", "created")
		repoStock(t, s, v.ID(), 3)
		repoBuyers(t, s, v.ID(), orders[0], orders[2])
		repoFound(t, s, orders[1], domain.OrderFailed, domain.FailDuplicate)
	}},
	{"same_order_twice_in_one_batch", func(t *testing.T, s repoSubject) {
		v := repoAdd(t, s, 1, 5)
		o := testenv.Order(t, 1, 1, v.ID())
		orders := []domain.VoucherOrder{o, o}
		repoExpect(t, repoBatch(t, s, orders...), orders, "created", "created again")
		repoStock(t, s, v.ID(), 4)
		repoBuyers(t, s, v.ID(), o)
	}},
	{"stock_runs_out_mid_batch", func(t *testing.T, s repoSubject) {
		v := repoAdd(t, s, 1, 3)
		var orders []domain.VoucherOrder
		for i := 1; i <= 5; i++ {
			orders = append(orders, testenv.Order(t, domain.OrderID(i), domain.UserID(i), v.ID()))
		}
		repoExpect(t, repoBatch(t, s, orders...), orders, "created", "created", "created", "out_of_stock", "out_of_stock")
		repoStock(t, s, v.ID(), 0)
		late := testenv.Order(t, 6, 6, v.ID())
		repoExpect(t, repoBatch(t, s, late), []domain.VoucherOrder{late}, "out_of_stock")
		repoStock(t, s, v.ID(), 0)
		repoBuyers(t, s, v.ID(), orders[:3]...)
		repoFound(t, s, orders[4], domain.OrderFailed, domain.FailOutOfStock)
	}},
	{"unknown_voucher", func(t *testing.T, s repoSubject) {
		v := repoAdd(t, s, 1, 5)
		normal := s.addNormal(t, domain.VoucherSpec{ShopID: 1, Title: "normal"})
		orders := []domain.VoucherOrder{
			testenv.Order(t, 1, 1, 404),
			testenv.Order(t, 2, 1, v.ID()),
			testenv.Order(t, 3, 2, normal),
		}
		repoExpect(t, repoBatch(t, s, orders...), orders, "voucher_not_found", "created", "voucher_not_found")
		repoExpect(t, repoBatch(t, s, orders...), orders, "voucher_not_found again", "created again", "voucher_not_found again")
		repoFound(t, s, orders[0], domain.OrderFailed, domain.FailVoucherGone)
		repoFound(t, s, orders[2], domain.OrderFailed, domain.FailVoucherGone)
		repoStock(t, s, v.ID(), 4)
		repoBuyers(t, s, 404)
	}},
	{"id_conflict", func(t *testing.T, s repoSubject) {
		v := repoAdd(t, s, 1, 5)
		w := repoAdd(t, s, 1, 5)
		mine := testenv.Order(t, 1, 1, v.ID())
		failed := testenv.Order(t, 2, 404, 404)
		repoExpect(t, repoBatch(t, s, mine, failed), []domain.VoucherOrder{mine, failed}, "created", "voucher_not_found")
		// Same IDs, other orders (a sequence that went back): refused, and
		// the IDs keep their recorded orders.
		clashes := []domain.VoucherOrder{testenv.Order(t, 1, 2, v.ID()), testenv.Order(t, 2, 3, w.ID()), testenv.Order(t, 1, 1, w.ID())}
		repoExpect(t, repoBatch(t, s, clashes...), clashes, "id_conflict", "id_conflict", "id_conflict")
		repoFound(t, s, mine, domain.OrderCreated, "")
		repoFound(t, s, failed, domain.OrderFailed, domain.FailVoucherGone)
		repoStock(t, s, v.ID(), 4)
		repoStock(t, s, w.ID(), 5)
		repoBuyers(t, s, w.ID())
	}},
	{"batch_spanning_vouchers", func(t *testing.T, s repoSubject) {
		a := repoAdd(t, s, 1, 1)
		b := repoAdd(t, s, 1, 2)
		orders := []domain.VoucherOrder{
			testenv.Order(t, 1, 1, b.ID()),
			testenv.Order(t, 2, 1, a.ID()), // the same user may hold one order of each voucher
			testenv.Order(t, 3, 2, a.ID()),
			testenv.Order(t, 4, 2, b.ID()),
			testenv.Order(t, 5, 3, b.ID()),
		}
		repoExpect(t, repoBatch(t, s, orders...), orders, "created", "created", "out_of_stock", "created", "out_of_stock")
		repoStock(t, s, a.ID(), 0)
		repoStock(t, s, b.ID(), 0)
		repoBuyers(t, s, a.ID(), orders[1])
		repoBuyers(t, s, b.ID(), orders[0], orders[3])
	}},
	{"find_reports_each_state", func(t *testing.T, s repoSubject) {
		v := repoAdd(t, s, 1, 1)
		created := testenv.Order(t, 10, 1, v.ID())
		soldOut := testenv.Order(t, 11, 2, v.ID())
		repoBatch(t, s, created, soldOut)
		repoFound(t, s, created, domain.OrderCreated, "")
		repoFound(t, s, soldOut, domain.OrderFailed, domain.FailOutOfStock)
		if _, err := repoFind(t, s, 12); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Fatalf("find unknown order: got %v", err)
		}
	}},
	{"buyers_lists_created_orders_only", func(t *testing.T, s repoSubject) {
		v := repoAdd(t, s, 1, 2)
		w := repoAdd(t, s, 1, 2)
		orders := []domain.VoucherOrder{
			testenv.Order(t, 30, 3, v.ID()),
			testenv.Order(t, 10, 1, v.ID()),
			testenv.Order(t, 20, 1, v.ID()), // duplicate
			testenv.Order(t, 40, 4, v.ID()), // out of stock
			testenv.Order(t, 50, 5, w.ID()),
		}
		repoExpect(t, repoBatch(t, s, orders...), orders, "created", "created", "duplicate", "out_of_stock", "created")
		repoBuyers(t, s, v.ID(), orders[1], orders[0])
		repoBuyers(t, s, w.ID(), orders[4])
	}},
	{"concurrent_batches_never_oversell", func(t *testing.T, s repoSubject) {
		const (
			users   = 100
			workers = 12
			batch   = 8
		)
		// scarce sells out, so late claims fail out_of_stock; plenty never
		// does, so every second claim of a user must fail duplicate. Batches
		// mix both, so writers also contend on two stock rows at once.
		scarce := repoAdd(t, s, 1, 40)
		plenty := repoAdd(t, s, 1, 1000)
		initial := map[domain.VoucherID]int{scarce.ID(): 40, plenty.ID(): 1000}
		// Each user has two claims per voucher (two order IDs, as if the gate
		// had been lost), and each claim is delivered by two workers.
		idOf := func(u, claim int, v domain.VoucherID) domain.OrderID {
			if v == plenty.ID() {
				claim += 5
			}
			return domain.OrderID(u*10 + claim)
		}
		var (
			mu       sync.Mutex
			outcomes = map[domain.OrderID][]ports.Outcome{}
			retried  int
			start    = make(chan struct{})
			wg       sync.WaitGroup
		)
		for w := range workers {
			var mine []domain.VoucherOrder
			for u := 1; u <= users; u++ {
				if (u+w)%3 == 0 {
					for _, v := range []domain.VoucherID{scarce.ID(), plenty.ID()} {
						mine = append(mine, testenv.Order(t, idOf(u, w%2, v), domain.UserID(u), v))
					}
				}
			}
			rand.New(rand.NewPCG(uint64(w), 1)).Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for len(mine) > 0 {
					n := min(batch, len(mine))
					out, failed, err := repoRetry(s, mine[:n])
					if err != nil {
						t.Errorf("worker %d: %v", w, err)
						return
					}
					mu.Lock()
					retried += failed
					for _, o := range out {
						outcomes[o.Order.ID()] = append(outcomes[o.Order.ID()], o)
					}
					mu.Unlock()
					mine = mine[n:]
				}
			}()
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
		// Retries are allowed by the contract; they are logged because many
		// of them would mean the locks do not serialise writers as intended.
		t.Logf("%d failed attempts were retried", retried)

		if len(outcomes) != 4*users {
			t.Fatalf("%d orders have outcomes, want %d", len(outcomes), 4*users)
		}
		type holding struct {
			v domain.VoucherID
			u domain.UserID
		}
		createdBy := map[holding]domain.OrderID{}
		for id, outs := range outcomes {
			news := 0
			for _, o := range outs {
				if o.New {
					news++
				}
				if o.State != outs[0].State || o.Reason != outs[0].Reason {
					t.Fatalf("order %d got different outcomes: %s and %s", id, repoShow(outs[0]), repoShow(o))
				}
			}
			if news != 1 {
				t.Fatalf("order %d: %d of its %d deliveries were new, want exactly 1", id, news, len(outs))
			}
			o := outs[0]
			h := holding{o.Order.VoucherID(), o.Order.UserID()}
			switch {
			case o.State == domain.OrderCreated:
				if prev, ok := createdBy[h]; ok {
					t.Fatalf("user %d holds two orders of voucher %d: %d and %d", h.u, h.v, prev, id)
				}
				createdBy[h] = id
				repoFound(t, s, o.Order, domain.OrderCreated, "")
			case o.Reason == domain.FailDuplicate,
				o.Reason == domain.FailOutOfStock && h.v == scarce.ID():
				repoFound(t, s, o.Order, domain.OrderFailed, o.Reason)
			default:
				t.Fatalf("order %d of voucher %d: unexpected outcome %s", id, h.v, repoShow(o))
			}
		}
		for v, stock := range initial {
			buyers, err := s.orders.Buyers(repoCtx(t), v)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range buyers {
				if createdBy[holding{v, b.UserID()}] != b.ID() {
					t.Fatalf("buyer %s does not match the outcomes", b)
				}
			}
			left := repoGet(t, s, v).Sale().Stock()
			want := min(stock, users)
			if len(buyers) != want || left != stock-want || left+len(buyers) != stock {
				t.Fatalf("voucher %d with stock %d: %d buyers, %d left; want %d buyers", v, stock, len(buyers), left, want)
			}
		}
	}},
}

// repoRetry does what the worker does: an error means nothing was committed,
// so the whole batch is sent again. It reports how many attempts failed.
func repoRetry(s repoSubject, orders []domain.VoucherOrder) ([]ports.Outcome, int, error) {
	var err error
	for attempt := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var out []ports.Outcome
		out, err = s.orders.CreateBatch(ctx, orders)
		cancel()
		if err == nil {
			return out, attempt, nil
		}
	}
	return nil, 20, fmt.Errorf("batch still failing after 20 attempts: %w", err)
}

func TestRepositoryContract(t *testing.T) {
	for _, b := range repoBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			newSubject := b.open(t)
			for _, tc := range slices.Concat(repoCases, repoReadCases, repoLifecycleCases, repoLimitCases) {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, newSubject(t)) })
			}
		})
	}
}
