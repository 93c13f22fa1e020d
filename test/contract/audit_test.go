package contract_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The AuditLog contract, on every store (memory, SQLite, MySQL): the trail
// of admin actions, appended with the change it records.

// auditCreation is the entry of a creation by admin.
func auditCreation(t *testing.T, admin domain.UserID) domain.AuditEntry {
	t.Helper()
	e, err := domain.NewAuditEntry(admin, domain.ActionCreateVoucher, 0, `{"title":"once"}`)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// auditOf is every entry about voucher, newest first.
func auditOf(t *testing.T, s repoSubject, voucher domain.VoucherID) []domain.AuditEntry {
	t.Helper()
	got, err := s.audit.List(repoCtx(t), ports.AuditQuery{Voucher: voucher, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// auditRecord records e as the service records an admin's change of a sale:
// with the change (one unit added to e's voucher), in ChangeSale's
// transaction.
func auditRecord(ctx context.Context, s repoSubject, e domain.AuditEntry) error {
	add := func(v domain.Voucher) (domain.Voucher, domain.AuditEntry, error) {
		sale, err := v.Sale().AddStock(1, testenv.Now())
		return v.WithSale(sale), e, err
	}
	_, changed, err := s.vouchers.(ports.SaleControls).ChangeSale(ctx, e.Voucher(), ports.Once{}, add)
	if err == nil && !changed {
		err = fmt.Errorf("voucher %d: the change was not stored", e.Voucher())
	}
	return err
}

func auditIDs(es []domain.AuditEntry) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.ID()
	}
	return out
}

var auditCases = []repoCase{
	{"creation_records_its_entry_in_its_transaction", func(t *testing.T, s repoSubject) {
		begin := testenv.Now().In(repoZone)
		v := testenv.SeckillVoucher(t, domain.VoucherSpec{ShopID: 4, Title: "audited", PayValue: 1, ActualValue: 2}, 5, begin, begin.Add(time.Hour))
		before := time.Now().Add(-time.Second)
		c, err := s.vouchers.AddSeckillOnce(repoCtx(t), "", "", v, auditCreation(t, 11))
		if err != nil || !c.Created {
			t.Fatalf("add without a key: %+v, %v", c, err)
		}
		again, err := s.vouchers.AddSeckillOnce(repoCtx(t), "", "", v, auditCreation(t, 11))
		if err != nil || !again.Created || again.Voucher.ID() == c.Voucher.ID() {
			t.Fatalf("no key is no idempotency: %+v, %v; want a second voucher", again, err)
		}
		got := auditOf(t, s, c.Voucher.ID())
		if len(got) != 1 {
			t.Fatalf("voucher %d has %d entries, want 1", c.Voucher.ID(), len(got))
		}
		e := got[0]
		if e.Admin() != 11 || e.Action() != domain.ActionCreateVoucher || e.Voucher() != c.Voucher.ID() ||
			e.Change() != `{"title":"once"}` || e.At().Before(before) || e.At().After(time.Now().Add(time.Second)) {
			t.Fatalf("entry: admin %d action %s voucher %d change %s at %s", e.Admin(), e.Action(), e.Voucher(), e.Change(), e.At())
		}
	}},
	{"creation_without_its_entry_stores_nothing", func(t *testing.T, s repoSubject) {
		begin := testenv.Now().In(repoZone)
		v := testenv.SeckillVoucher(t, domain.VoucherSpec{ShopID: 5, Title: "anonymous", PayValue: 1, ActualValue: 2}, 5, begin, begin.Add(time.Hour))
		if _, err := s.vouchers.AddSeckillOnce(repoCtx(t), "k", "fp", v, domain.AuditEntry{}); err == nil {
			t.Fatal("a creation with no audit entry was accepted")
		}
		if list, err := s.vouchers.ListByShop(repoCtx(t), 5, listAll); err != nil || len(list) != 0 {
			t.Fatalf("shop 5 lists %v (err %v), want none", repoIDs(list), err)
		}
	}},
	{"list_is_newest_first_in_pages_and_by_voucher", func(t *testing.T, s repoSubject) {
		a, b := repoAdd(t, s, 1, 5), repoAdd(t, s, 1, 5)
		var recorded []domain.AuditEntry
		for i := range 5 {
			vid := a.ID()
			if i%2 == 1 {
				vid = b.ID()
			}
			e, err := domain.NewAuditEntry(domain.UserID(20+i), domain.ActionAddStock, vid, fmt.Sprintf(`{"n":%d}`, i))
			if err != nil {
				t.Fatal(err)
			}
			if err := auditRecord(repoCtx(t), s, e); err != nil {
				t.Fatal(err)
			}
			newest, err := s.audit.List(repoCtx(t), ports.AuditQuery{Limit: 1})
			if err != nil || len(newest) != 1 {
				t.Fatalf("record %d: newest entry %v, %v", i, auditIDs(newest), err)
			}
			saved := newest[0]
			if saved.Admin() != e.Admin() || saved.Voucher() != vid || saved.Change() != e.Change() {
				t.Fatalf("record %d: newest entry is admin %d voucher %d %s, want admin %d voucher %d %s", i,
					saved.Admin(), saved.Voucher(), saved.Change(), e.Admin(), vid, e.Change())
			}
			if saved.ID() <= 0 || (i > 0 && saved.ID() <= recorded[i-1].ID()) || saved.At().IsZero() {
				t.Fatalf("record %d: id %d at %s, after id %v", i, saved.ID(), saved.At(), auditIDs(recorded))
			}
			recorded = append(recorded, saved)
		}
		var walked []domain.AuditEntry
		var before int64
		for pages := 0; ; pages++ {
			page, err := s.audit.List(repoCtx(t), ports.AuditQuery{Before: before, Limit: 2})
			if err != nil || len(page) > 2 || pages > 3 {
				t.Fatalf("page %d before %d: %v, %v", pages, before, auditIDs(page), err)
			}
			if len(page) == 0 {
				break
			}
			walked = append(walked, page...)
			before = page[len(page)-1].ID()
		}
		if len(walked) != 5 {
			t.Fatalf("walked %v, want the 5 entries", auditIDs(walked))
		}
		for i, e := range walked {
			want := recorded[4-i]
			if e.ID() != want.ID() || e.Admin() != want.Admin() || e.Voucher() != want.Voucher() || e.Change() != want.Change() ||
				!e.At().Equal(want.At()) {
				t.Fatalf("entry %d: %d admin %d voucher %d %s %s, want %d admin %d voucher %d %s %s", i,
					e.ID(), e.Admin(), e.Voucher(), e.Change(), e.At(), want.ID(), want.Admin(), want.Voucher(), want.Change(), want.At())
			}
		}
		if got := auditOf(t, s, b.ID()); len(got) != 2 || got[0].ID() != recorded[3].ID() || got[1].ID() != recorded[1].ID() {
			t.Fatalf("voucher %d's entries %v, want %d, %d", b.ID(), auditIDs(got), recorded[3].ID(), recorded[1].ID())
		}
	}},
	{"concurrent_records_each_get_their_own_id", func(t *testing.T, s repoSubject) {
		v := repoAdd(t, s, 1, 5)
		const n = 8
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				e, err := domain.NewAuditEntry(domain.UserID(i+1), domain.ActionAddStock, v.ID(), `{}`)
				if err == nil {
					err = auditRecord(repoCtx(t), s, e)
				}
				if err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		got := auditOf(t, s, v.ID())
		if len(got) != n {
			t.Fatalf("%d entries after %d concurrent records: %v", len(got), n, auditIDs(got))
		}
		for i := 1; i < n; i++ {
			if got[i].ID() >= got[i-1].ID() {
				t.Fatalf("entries %v: not each its own id, newest first", auditIDs(got))
			}
		}
	}},
}

// TestAuditLogContract: every AuditLog appends, pages newest first, and
// records a creation's entry with the voucher or not at all.
func TestAuditLogContract(t *testing.T) {
	for _, b := range repoBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			newSubject := b.open(t)
			for _, tc := range auditCases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, newSubject(t)) })
			}
		})
	}
}
