package component_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
)

// control sends an admin's sale control to one instance and wants it done.
func control(t *testing.T, app *infra.App, vid domain.VoucherID, action string, body any) {
	t.Helper()
	status, env := postJSON(t, http.DefaultClient, fmt.Sprintf("http://%s/admin/vouchers/%d/%s", app.Addr(), vid, action),
		login(t, app, adminUID), body)
	if status != http.StatusOK || !env.Success {
		t.Fatalf("%s of voucher %d: %d %+v", action, vid, status, env)
	}
}

// TestSaleControlsTakeEffectOnEveryInstance: two instances share Redis and
// MariaDB; a pause, a resume, added stock and an end sent to one hold at
// once for the claims of the other (no waiting: the gate decides them),
// and the books balance with the initial stock moved by what was added.
func TestSaleControlsTakeEffectOnEveryInstance(t *testing.T) {
	a, _ := startServiceOn(t, infra.QueueStream, "redis", func(c *infra.Config) { c.Consumer = "controls-a" })
	b, _ := startServiceOn(t, infra.QueueStream, "redis", func(c *infra.Config) {
		c.Consumer, c.MySQLDSN, c.KeyPrefix = "controls-b", a.Config.MySQLDSN, a.Config.KeyPrefix
	})
	const initial, added = 3, 4
	vid := createVoucher(t, a, initial)
	user := domain.UserID(5_000_000)
	next := func() domain.UserID { user++; return user }

	control(t, a, vid, "pause", nil)
	if env := claim(t, b, vid, login(t, b, next())); env.Success || env.Code != domain.ErrPaused.Code() {
		t.Fatalf("claim on the other instance of a paused sale: %+v, want paused", env)
	}
	control(t, b, vid, "resume", nil)
	mustClaim(t, a, vid, next())

	control(t, b, vid, "stock", map[string]int{"add": added})
	for i := range 4 { // 1 + 4 sold of 7, alternating instances
		mustClaim(t, []*infra.App{a, b}[i%2], vid, next())
	}
	control(t, a, vid, "end", nil)
	if env := claim(t, b, vid, login(t, b, next())); env.Success || env.Code != domain.ErrEnded.Code() {
		t.Fatalf("claim on the other instance after the end: %+v, want ended", env)
	}
	waitOrders(t, a, vid, 5)
	lifecycleBalanced(t, a, vid, initial+added)
}
