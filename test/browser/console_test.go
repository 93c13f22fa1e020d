package browser_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
)

// operatorZone is where the console's operator sits: the times they type
// are theirs, not the server's (UTC here).
var operatorZone = time.FixedZone("UTC+8", 8*3600)

// typed is a time as an operator in operatorZone types it into a
// datetime-local field, in the field's normalized form: the browser drops
// zero seconds ("15:04", not "15:04:00"), and chromedp.SetValue reads the
// value back and fails unless it is what was set — so a time written with
// ":00" made the test fail once a minute.
func typed(t time.Time) string {
	return strings.TrimSuffix(t.In(operatorZone).Format("2006-01-02T15:04:05"), ":00")
}

// TestConsoleRunsASale: an admin, in a browser whose zone is not the
// server's, runs a sale from the console alone: creates it with a waiting
// room (a double click creates one), sees it live, pauses it (a buyer's
// claim answers paused), resumes it, adds stock (a double click adds once;
// the card, Redis and GET /voucher/list agree), is shown a refused move of
// the end verbatim, moves the end, ends it, lists its orders by state and a
// larger sale's in pages, downloads the CSV (its rows are the orders), and
// reads the audit trail, one entry per action; an addition whose answer is
// lost is sent again under its key and adds once. The voucher's title is
// markup, shown as text; the token never appears in a URL.
func TestConsoleRunsASale(t *testing.T) {
	browserPath := chromium(t)
	base, app := startService(t)
	adminToken := mint(t, app, admin)
	bctx := newBrowser(t, browserPath)
	netlog := watchNetwork(t, bctx)
	downloads := t.TempDir()
	if _, err := chromedp.Call(bctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: downloads, EventsEnabled: new(true),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(bctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Shanghai"}); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what, cond string) { t.Helper(); waitOn(t, bctx, what, cond) }
	adminLogin(t, bctx, base, adminToken)

	// Create the sale with its room through the form, with a double click.
	// The sale begins a few seconds on (a room needs domain.RoomLead), in
	// whole seconds as the field takes them.
	const title = `<img src=x onerror="document.body.dataset.pwned=1">Flash sale <b>50% off</b>`
	begin := time.Now().Add(domain.RoomLead + 4*time.Second).Truncate(time.Second)
	end := begin.Add(2 * time.Hour)
	err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#create summary`)),
		chromedp.SendKeys(chromedp.CSS(`#create-form [name="title"]`), title),
		chromedp.SendKeys(chromedp.CSS(`#create-form [name="subTitle"]`), "console test"),
		chromedp.SendKeys(chromedp.CSS(`#create-form [name="payValue"]`), "8000"),
		chromedp.SendKeys(chromedp.CSS(`#create-form [name="actualValue"]`), "10000"),
		chromedp.SendKeys(chromedp.CSS(`#create-form [name="stock"]`), "5"),
		chromedp.SetValue(chromedp.CSS(`#create-form [name="beginTime"]`), typed(begin)),
		chromedp.SetValue(chromedp.CSS(`#create-form [name="endTime"]`), typed(end)),
		chromedp.Click(chromedp.CSS(`#create-form [name="room"]`)),
		chromedp.SetValue(chromedp.CSS(`#create-form [name="opensBeforeSeconds"]`), "60"),
		chromedp.SetValue(chromedp.CSS(`#create-form [name="admitPerSecond"]`), "100"),
	)
	if err != nil {
		t.Fatalf("fill in the new sale: %v", err)
	}
	// Two orders per user with a room is refused, as the service says,
	// and creates nothing; the operator clears the field and sends again.
	err = chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#create-form [name="limitPerUser"]`), "2"),
		chromedp.Click(chromedp.CSS(`#create-form button[type="submit"]`)),
	)
	if err != nil {
		t.Fatalf("send a sale of 2 per user with a room: %v", err)
	}
	waitFor("the refusal of 2 per user with a room", `(r => r.classList.contains('error') && /limitPerUser 2/.test(r.textContent))(document.querySelector('#create-form [data-result]'))`)
	if n := countTitled(shopVouchers(t, base), title); n != 0 {
		t.Fatalf("a refused creation made %d sales", n)
	}
	if err := chromedp.Do(bctx, chromedp.SetValue(chromedp.CSS(`#create-form [name="limitPerUser"]`), "")); err != nil {
		t.Fatal(err)
	}
	doubleClick(t, bctx, `#create-form button[type="submit"]`)
	waitFor("the sale created", `/^Created sale #[0-9]+, with its waiting room\.$/.test(document.querySelector('#create-form [data-result]').textContent)`)
	voucher := evalJS[string](t, bctx, `document.querySelector('#create-form [data-result]').dataset.created`)
	listed := shopVouchers(t, base)
	if n := countTitled(listed, title); n != 1 {
		t.Fatalf("a double click on Create made %d sales titled %q, want 1", n, title)
	}
	v := find(t, listed, voucher)
	if v.WaitingRoom == nil || v.WaitingRoom.OpensBeforeSeconds != 60 || v.WaitingRoom.AdmitPerSecond != 100 || v.Stock == nil || *v.Stock != 5 {
		t.Fatalf("the sale created is %+v, want stock 5 and a room opening 60 s before, admitting 100/s", v)
	}
	if got := serverTime(t, app, v.BeginTime); !got.Equal(begin) {
		t.Fatalf("the sale begins at %s, want %s: the operator typed %s in their zone", got, begin, typed(begin))
	}

	card := fmt.Sprintf(`[data-voucher="%s"]`, voucher)
	fieldJS := func(name string) string {
		return fmt.Sprintf(`(document.querySelector('%s [data-field="%s"]') || {}).textContent`, card, name)
	}
	waitFor("the new sale's card", fmt.Sprintf(`!!document.querySelector('%s')`, card))
	if got := evalJS[string](t, bctx, fmt.Sprintf(`document.querySelector('%s .title').textContent`, card)); got != title {
		t.Fatalf("the card's title reads %q, want the title as text: %q", got, title)
	}
	noMarkup := func(where string) {
		t.Helper()
		// The CSP would stop the handler; the check is that no element was
		// made of the title at all.
		if n := evalJS[int](t, bctx, `document.querySelectorAll('img, b').length`); n != 0 {
			t.Fatalf("%s: the page made %d elements of server strings", where, n)
		}
		if evalJS[bool](t, bctx, `document.body.dataset.pwned !== undefined`) {
			t.Fatalf("%s: the title's script ran", where)
		}
	}
	noMarkup("the card")

	// Three buyers wait in the room and are admitted at the begin.
	buyers := make([]string, 3)
	passes := make([]string, 3)
	for i := range buyers {
		buyers[i] = mint(t, app, domain.UserID(2000+i))
	}
	for i := range buyers {
		passes[i] = admitted(t, base, voucher, buyers[i])
	}
	waitFor("the sale live", fmt.Sprintf(`%s === "live"`, badgeJS(card)))

	// Pause: a claim with a valid pass answers paused.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(card+` [data-action="pause"]`))); err != nil {
		t.Fatal(err)
	}
	waitFor("the sale paused", fmt.Sprintf(`%s === "Paused: claims answer paused until you resume it." && `+
		`!document.querySelector('%s .badge.paused').hidden && !document.querySelector('%s [data-action="resume"]').hidden`,
		fieldJS("result"), card, card))
	waitFor("the pause atop the trail, read again by itself",
		`(document.querySelector('#audit tbody tr') || {dataset: {}}).dataset.action === "sale.pause"`)
	claimURL := base + "/voucher-order/seckill/" + voucher
	if _, env := call(t, http.MethodPost, claimURL, buyers[0], "", map[string]string{"X-Room-Pass": passes[0]}); env.Code != "paused" {
		t.Fatalf("a claim of the paused sale answered %+v, want code paused", env)
	}
	// Resume: the buyers' claims are taken.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(card+` [data-action="resume"]`))); err != nil {
		t.Fatal(err)
	}
	waitFor("the sale resumed", fmt.Sprintf(`%s === "Resumed: claims are taken again." && document.querySelector('%s .badge.paused').hidden`,
		fieldJS("result"), card))
	orders := make([]string, len(buyers))
	for i := range buyers {
		status, env := call(t, http.MethodPost, claimURL, buyers[i], "", map[string]string{"X-Room-Pass": passes[i]})
		if status != http.StatusOK || !env.Success {
			t.Fatalf("buyer %d's claim after the resume: %d %+v", i, status, env)
		}
		orders[i] = env.dataString(t)
	}
	waitFor("the orders in MySQL", fmt.Sprintf(`%s === "3"`, fieldJS("unpaid")))
	paid := orders[1]
	body := fmt.Sprintf(`{"orderId":%q,"amount":8000,"transactionId":"tx-%s"}`, paid, paid)
	postWith(t, base+"/payments/notify", body, map[string]string{httpapi.SignatureHeader: httpapi.Sign([]byte(paySecret), []byte(body))})
	waitFor("one of them paid", fmt.Sprintf(`%s === "2" && %s === "1"`, fieldJS("unpaid"), fieldJS("paid")))

	// Add 3 units with a double click: added once, and the card, Redis and
	// the shop's list agree on 2 + 3 left.
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.CSS(card+` .add-stock input`), "3")); err != nil {
		t.Fatal(err)
	}
	doubleClick(t, bctx, card+` .add-stock button`)
	waitFor("the units added", fmt.Sprintf(`%s === "Added 3: 5 left in MySQL, 3 added in all."`, fieldJS("result")))
	waitFor("the stock on the card", fmt.Sprintf(`%s === "5" && %s === "5"`, fieldJS("dbStock"), fieldJS("gateStock")))
	if v := find(t, shopVouchers(t, base), voucher); v.Stock == nil || *v.Stock != 5 {
		t.Fatalf("GET /voucher/list answers stock %v, the card 5", v.Stock)
	}
	adds := netlog.sent(http.MethodPost, "/admin/vouchers/"+voucher+"/stock")
	if len(adds) == 0 {
		t.Fatal("no POST .../stock was seen")
	}
	for _, x := range adds {
		if k := x.header("Idempotency-Key"); k == "" || k != adds[0].header("Idempotency-Key") {
			t.Fatalf("a double click sent keys %q and %q: a retry must carry the first", adds[0].header("Idempotency-Key"), k)
		}
	}

	// A refused move is shown in the service's own words.
	past := begin.Add(time.Second) // after the begin, already gone
	_, refusal := call(t, http.MethodPut, base+"/admin/vouchers/"+voucher+"/end-time", adminToken,
		fmt.Sprintf(`{"endTime":%q}`, past.Format(time.RFC3339)), map[string]string{"Accept-Language": "en"})
	if refusal.Code != "end_in_past" || refusal.ErrorMsg == "" {
		t.Fatalf("an end in the past answered %+v", refusal)
	}
	moveEnd := func(to time.Time) {
		t.Helper()
		err := chromedp.Do(bctx,
			chromedp.SetValue(chromedp.CSS(card+` .move-end input`), typed(to)),
			chromedp.Click(chromedp.CSS(card+` .move-end button`)),
		)
		if err != nil {
			t.Fatal(err)
		}
	}
	moveEnd(past)
	waitFor("the refusal, verbatim", fmt.Sprintf(`%s === %q`, fieldJS("result"), refusal.ErrorMsg))
	// On a whole minute, so the field's normalized form is typed on every run.
	newEnd := time.Now().Add(time.Hour).Truncate(time.Minute)
	moveEnd(newEnd)
	waitFor("the end moved", fmt.Sprintf(`%s === %q`, fieldJS("result"), "Ends at "+newEnd.UTC().Format("2006-01-02 15:04:05")+" UTC."))
	if got := serverTime(t, app, find(t, shopVouchers(t, base), voucher).EndTime); !got.Equal(newEnd) {
		t.Fatalf("the sale ends at %s, want %s", got, newEnd)
	}

	// End it, once confirmed: the card goes, its records stay.
	if evalJS[bool](t, bctx, fmt.Sprintf(`document.querySelector('%s .confirm').offsetParent !== null`, card)) {
		t.Fatal("the confirmation to end the sale shows before End now was pressed")
	}
	err = chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(card+` [data-action="end"]`)),
		chromedp.Click(chromedp.CSS(card+` [data-action="end-confirm"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitFor("the sale ended and its records shown", fmt.Sprintf(`!document.querySelector('%s') && `+
		`/^Sale #%s ended at .* UTC: its orders and audit trail are below\.$/.test(document.getElementById('records-note').textContent) && `+
		`document.querySelectorAll('#orders tbody tr').length === 3 && document.querySelectorAll('#audit tbody tr').length === 6`,
		card, voucher))
	if got := serverTime(t, app, find(t, shopVouchers(t, base), voucher).EndTime); got.After(time.Now()) {
		t.Fatalf("the ended sale ends at %s, in the future", got)
	}
	if status, env := call(t, http.MethodPost, claimURL, mint(t, app, 2999), "", nil); status != http.StatusOK || env.Success {
		t.Fatalf("a claim of the ended sale: %d %+v", status, env)
	}

	// Its orders, then the paid ones only.
	rows := func() []string {
		return evalJS[[]string](t, bctx, `Array.from(document.querySelectorAll('#orders tbody tr'), tr => tr.dataset.order)`)
	}
	if got := rows(); !sameSet(got, orders) {
		t.Fatalf("the console lists orders %v, want %v", got, orders)
	}
	err = chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#records-form [name="state"]`), "paid"),
		chromedp.Click(chromedp.CSS(`#records-form button[type="submit"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitFor("the paid orders", fmt.Sprintf(`Array.from(document.querySelectorAll('#orders tbody tr'), tr => tr.dataset.order).join() === %q`, paid))

	// The audit trail: one entry per action, newest first; the failed move
	// and the second clicks recorded nothing.
	actions := evalJS[[]string](t, bctx, `Array.from(document.querySelectorAll('#audit tbody tr'), tr => tr.dataset.action)`)
	want := []string{"sale.end", "sale.end_time", "sale.stock", "sale.resume", "sale.pause", "voucher.create"}
	if !slices.Equal(actions, want) {
		t.Fatalf("the audit trail lists %v, want %v", actions, want)
	}
	created := evalJS[string](t, bctx, `document.querySelector('#audit tbody tr[data-action="voucher.create"] td:last-child').textContent`)
	if !strings.Contains(created, `<img src=x onerror=\"document.body.dataset.pwned=1\">`) {
		t.Fatalf("the creation's entry reads %q, want the title in it as text", created)
	}
	noMarkup("the audit trail")

	// The CSV of all its orders, downloaded through the page: its rows are
	// the orders the API lists.
	err = chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#records-form [name="state"]`), ""),
		chromedp.Click(chromedp.CSS(`#records-form button[type="submit"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitFor("all the orders again", `document.querySelectorAll('#orders tbody tr').length === 3`)
	file := download(t, bctx, downloads, `#orders-csv`, "voucher-"+voucher+"-orders.csv")
	listedOrders := adminOrders(t, base, adminToken, voucher)
	if len(file) != 1+len(listedOrders) || strings.Join(file[0], ",") != "id,userId,state,reason,claimedAt,payDeadline,paidAt" {
		t.Fatalf("the CSV holds %d lines, want a header and %d orders: %q", len(file), len(listedOrders), file)
	}
	for i, o := range listedOrders {
		if r := file[1+i]; r[0] != o.ID || r[1] != o.UserID || r[2] != o.State || r[6] != o.PaidAt {
			t.Fatalf("CSV row %d is %q, the API lists %+v", i+1, r, o)
		}
	}
	waitFor("the download said", `/^Downloaded voucher-[0-9]+-orders\.csv \([0-9]+ bytes\)\.$/.test(document.getElementById('records-status').textContent)`)

	// A larger sale's orders come in pages.
	now := time.Now()
	big := post(t, base+"/voucher/seckill", adminToken, fmt.Sprintf(
		`{"shopId":1,"title":"Big sale","payValue":100,"actualValue":200,"type":1,"stock":30,"beginTime":%q,"endTime":%q}`,
		now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339)))
	for i := range 25 {
		post(t, base+"/voucher-order/seckill/"+big, mint(t, app, domain.UserID(3000+i)), "")
	}
	waitFor("the big sale's orders in MySQL", fmt.Sprintf(`%s === "25"`,
		fmt.Sprintf(`(document.querySelector('[data-voucher="%s"] [data-field="unpaid"]') || {}).textContent`, big)))
	err = chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-voucher="%s"] [data-action="records"]`, big))),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitFor("the first page", `document.querySelectorAll('#orders tbody tr').length === 20 && !document.getElementById('orders-more').hidden`)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("orders-more"))); err != nil {
		t.Fatal(err)
	}
	waitFor("the second page", `document.querySelectorAll('#orders tbody tr').length === 25 && document.getElementById('orders-more').hidden`)
	var bigIDs []string
	for _, o := range adminOrders(t, base, adminToken, big) {
		bigIDs = append(bigIDs, o.ID)
	}
	if got := rows(); !slices.Equal(got, bigIDs) {
		t.Fatalf("the pages list %v, want the API's %v", got, bigIDs)
	}

	// An addition the service applied whose answer is lost on the way back:
	// the page says nothing is known and keeps the amount; sent again, it
	// carries the same key and adds nothing more.
	bigCard := fmt.Sprintf(`[data-voucher="%s"]`, big)
	stockPath := "/admin/vouchers/" + big + "/stock"
	ictx, stopIntercepting := context.WithCancel(bctx)
	defer stopIntercepting()
	intercepted := chromedp.Events(ictx, fetch.RequestPaused)
	if _, err := chromedp.Call(bctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
		{URLPattern: "*" + stockPath, RequestStage: fetch.RequestStageResponse},
	}}); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.CSS(bigCard+` .add-stock input`), "2"),
		chromedp.Click(chromedp.CSS(bigCard+` .add-stock button`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	for ev, err := range intercepted {
		if err != nil {
			t.Fatalf("the addition was never sent: %v", err)
		}
		if ev.ResponseStatusCode != http.StatusOK {
			t.Fatalf("the addition answered %d", ev.ResponseStatusCode)
		}
		if _, err := chromedp.Call(bctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonConnectionReset}); err != nil {
			t.Fatal(err)
		}
		break
	}
	stopIntercepting()
	if _, err := chromedp.Call(bctx, fetch.Disable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	bigResult := fmt.Sprintf(`document.querySelector('%s [data-field="result"]').textContent`, bigCard)
	waitFor("the lost answer said", fmt.Sprintf(`/^no answer: .*\(sending again is safe\)$/.test(%s) && document.querySelector('%s .add-stock input').value === "2"`, bigResult, bigCard))
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(bigCard+` .add-stock button`))); err != nil {
		t.Fatal(err)
	}
	waitFor("the addition confirmed, once", fmt.Sprintf(`%s === "Added 2: 7 left in MySQL, 2 added in all."`, bigResult))
	retried := netlog.sent(http.MethodPost, stockPath)
	if len(retried) != 2 || retried[0].header("Idempotency-Key") != retried[1].header("Idempotency-Key") {
		t.Fatalf("the addition and its retry sent %d requests with keys %q: want 2 with one key", len(retried),
			[]string{retried[0].header("Idempotency-Key"), retried[len(retried)-1].header("Idempotency-Key")})
	}

	netlog.tokenOnlyInHeaders(t, adminToken)
}

// TestConsoleRefusesANonAdmin: a user who is not an admin opens the
// console and is told so, with nothing to act on; and each action of the
// console, sent by the page with that user's token (the tab's token
// swapped under an admin's open page, as hmdp's front end in the same tab
// would), is answered 403, the page says so, and nothing changes.
func TestConsoleRefusesANonAdmin(t *testing.T) {
	browserPath := chromium(t)
	base, app := startService(t)
	adminToken := mint(t, app, admin)
	userToken := mint(t, app, 77)
	now := time.Now()
	end := now.Add(time.Hour).Truncate(time.Second)
	voucher := post(t, base+"/voucher/seckill", adminToken, fmt.Sprintf(
		`{"shopId":1,"title":"Members' sale","payValue":100,"actualValue":200,"type":1,"stock":10,"beginTime":%q,"endTime":%q}`,
		now.Add(-time.Minute).Format(time.RFC3339), end.Format(time.RFC3339)))
	bctx := newBrowser(t, browserPath)
	netlog := watchNetwork(t, bctx)
	waitFor := func(what, cond string) { t.Helper(); waitOn(t, bctx, what, cond) }
	const refusal = `Forbidden: an admin account is needed (403). That user is not an admin, so every action is refused and nothing was changed: ` +
		`log in with the token of a user listed in SECKILL_ADMIN_USERS.`
	refused := fmt.Sprintf(`!document.getElementById('login').hidden && document.getElementById('board').hidden && `+
		`document.getElementById('login-error').textContent === %q && !sessionStorage.getItem('token') && `+
		`document.querySelectorAll('#sales article').length === 0`, refusal)

	// The user logs in: a refusal, and nothing to press but the login.
	err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/admin/sales"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), userToken),
		chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitFor("the refusal", refused)
	if n := evalJS[int](t, bctx, `Array.from(document.querySelectorAll('button, input, select')).filter(e => e.offsetParent !== null && !e.closest('#login')).length`); n != 0 {
		t.Fatalf("a refused user sees %d controls besides the login", n)
	}

	card := fmt.Sprintf(`[data-voucher="%s"]`, voucher)
	asAdmin := func() {
		t.Helper()
		adminLogin(t, bctx, base, adminToken)
		if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(card))); err != nil {
			t.Fatal(err)
		}
	}
	// Each case swaps the tab's token and acts in one script, so the
	// request the action sends carries the user's token whatever the poll
	// does meanwhile.
	cases := []struct {
		name    string
		prepare string // as the admin, before the swap
		act     string
		sends   []string // method and path of what the action sends
	}{
		{"pause", ``, `document.querySelector('{CARD} [data-action="pause"]').click()`, []string{"POST /admin/vouchers/{V}/pause"}},
		{"resume", ``, `document.querySelector('{CARD} [data-action="resume"]').click()`, []string{"POST /admin/vouchers/{V}/resume"}},
		{"end_now", `document.querySelector('{CARD} [data-action="end"]').click()`,
			`document.querySelector('{CARD} [data-action="end-confirm"]').click()`, []string{"POST /admin/vouchers/{V}/end"}},
		{"move_end", ``, `(f => { f.querySelector('input').value = '{LATER}'; f.requestSubmit(); })(document.querySelector('{CARD} .move-end'))`,
			[]string{"PUT /admin/vouchers/{V}/end-time"}},
		{"add_stock", ``, `(f => { f.querySelector('input').value = '5'; f.requestSubmit(); })(document.querySelector('{CARD} .add-stock'))`,
			[]string{"POST /admin/vouchers/{V}/stock"}},
		{"create", ``, `(f => {
				const set = (n, v) => { f.querySelector('[name="' + n + '"]').value = v; };
				set('title', 'Not mine'); set('payValue', '1'); set('actualValue', '2'); set('stock', '1');
				set('beginTime', '{LATER}'); set('endTime', '{LATEST}'); f.requestSubmit();
			})(document.getElementById('create-form'))`, []string{"POST /voucher/seckill"}},
		{"orders_and_audit", ``, `(f => { f.querySelector('[name="voucher"]').value = '{V}'; f.requestSubmit(); })(document.getElementById('records-form'))`,
			[]string{"GET /admin/vouchers/{V}/orders", "GET /admin/audit"}},
		{"csv", `document.querySelector('{CARD} [data-action="records"]').click()`,
			`document.getElementById('orders-csv').click()`, []string{"GET /admin/vouchers/{V}/orders.csv"}},
	}
	js := strings.NewReplacer("{CARD}", card, "{V}", voucher,
		"{LATER}", typed(now.Add(2*time.Hour)), "{LATEST}", typed(now.Add(3*time.Hour)))
	for _, c := range cases {
		asAdmin()
		if c.prepare != "" {
			evalJS[any](t, bctx, js.Replace(c.prepare)+`; null`)
			if c.name == "csv" {
				waitFor("the admin's orders panel", `!document.getElementById('orders-box').hidden && document.getElementById('records-status').textContent === ''`)
			}
		}
		evalJS[any](t, bctx, fmt.Sprintf(`sessionStorage.setItem('token', %q); %s; null`, userToken, js.Replace(c.act)))
		waitFor(c.name+" refused", refused)
		for _, s := range c.sends {
			method, path, _ := strings.Cut(js.Replace(s), " ")
			x := netlog.await(t, method, path, userToken)
			if x.status != http.StatusForbidden {
				t.Fatalf("%s: %s %s with the user's token answered %d, want 403", c.name, method, path, x.status)
			}
		}
	}

	// Nothing changed: the sale is as created, its trail holds only its
	// creation, and the shop has no other voucher.
	status, env := call(t, http.MethodGet, base+"/admin/sales.json", adminToken, "", nil)
	var board struct {
		Sales []struct {
			ID      string `json:"id"`
			Paused  bool   `json:"paused"`
			Added   int    `json:"added"`
			DBStock int    `json:"dbStock"`
			EndTime string `json:"endTime"`
		} `json:"sales"`
	}
	if status != http.StatusOK || json.Unmarshal(env.Data, &board) != nil || len(board.Sales) != 1 {
		t.Fatalf("the board: %d %+v", status, env)
	}
	s := board.Sales[0]
	if s.ID != voucher || s.Paused || s.Added != 0 || s.DBStock != 10 || !serverTime(t, app, s.EndTime).Equal(end) {
		t.Fatalf("after the refusals the sale is %+v, want it unpaused, 10 units, none added, ending %s", s, end)
	}
	if n := len(shopVouchers(t, base)); n != 1 {
		t.Fatalf("the shop has %d vouchers, want the admin's 1", n)
	}
	status, env = call(t, http.MethodGet, base+"/admin/audit", adminToken, "", nil)
	var trail struct {
		Entries []struct {
			Action  string `json:"action"`
			AdminID string `json:"adminId"`
		} `json:"entries"`
	}
	if status != http.StatusOK || json.Unmarshal(env.Data, &trail) != nil || len(trail.Entries) != 1 || trail.Entries[0].Action != "voucher.create" {
		t.Fatalf("the audit trail after the refusals: %d %s", status, env.Data)
	}
	netlog.tokenOnlyInHeaders(t, adminToken)
	netlog.tokenOnlyInHeaders(t, userToken)
}

func mint(t *testing.T, app *infra.App, user domain.UserID) string {
	t.Helper()
	tok, err := app.Tokens.Mint(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// evalJS evaluates the expression in the page and decodes its value.
func evalJS[T any](t *testing.T, bctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(bctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

type apiEnvelope struct {
	Success  bool            `json:"success"`
	Code     string          `json:"code"`
	ErrorMsg string          `json:"errorMsg"`
	Data     json.RawMessage `json:"data"`
}

func (e apiEnvelope) dataString(t *testing.T) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(e.Data, &s); err != nil {
		t.Fatalf("data %s is not a string: %v", e.Data, err)
	}
	return s
}

// call sends one request and decodes the envelope, whatever its status.
func call(t *testing.T, method, url, token, body string, header map[string]string) (int, apiEnvelope) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("authorization", token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var env apiEnvelope
	if err := json.NewDecoder(res.Body).Decode(&env); err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return res.StatusCode, env
}

type listedVoucher struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Stock       *int   `json:"stock"`
	BeginTime   string `json:"beginTime"`
	EndTime     string `json:"endTime"`
	WaitingRoom *struct {
		OpensBeforeSeconds int64 `json:"opensBeforeSeconds"`
		AdmitPerSecond     int   `json:"admitPerSecond"`
	} `json:"waitingRoom"`
}

// shopVouchers is GET /voucher/list/1, the shop's page's view. The list is
// reused for up to a second, but a control or a creation answered here
// drops it at once.
func shopVouchers(t *testing.T, base string) []listedVoucher {
	t.Helper()
	status, env := call(t, http.MethodGet, base+"/voucher/list/1", "", "", nil)
	var vs []listedVoucher
	if status != http.StatusOK || json.Unmarshal(env.Data, &vs) != nil {
		t.Fatalf("GET /voucher/list/1: %d %+v", status, env)
	}
	return vs
}

func find(t *testing.T, vs []listedVoucher, id string) listedVoucher {
	t.Helper()
	for _, v := range vs {
		if v.ID == id {
			return v
		}
	}
	t.Fatalf("voucher %s is not in the shop's list %+v", id, vs)
	return listedVoucher{}
}

func countTitled(vs []listedVoucher, title string) int {
	n := 0
	for _, v := range vs {
		if v.Title == title {
			n++
		}
	}
	return n
}

// serverTime reads a zone-less time the API answered, in the service's zone.
func serverTime(t *testing.T, app *infra.App, s string) time.Time {
	t.Helper()
	at, err := time.ParseInLocation("2006-01-02T15:04:05", s, app.Config.Location())
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return at
}

// admitted joins the sale's room as the user and polls, as the room page
// does, until the room hands out a pass.
func admitted(t *testing.T, base, voucher, token string) string {
	t.Helper()
	status, env := call(t, http.MethodPost, base+"/voucher-order/room/"+voucher+"/join", token, "", nil)
	var st struct {
		Ticket      string `json:"ticket"`
		Pass        string `json:"pass"`
		PollAfterMs int64  `json:"pollAfterMs"`
	}
	if status != http.StatusOK || !env.Success || json.Unmarshal(env.Data, &st) != nil {
		t.Fatalf("join: %d %+v", status, env)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, env := call(t, http.MethodGet, base+"/voucher-order/room/"+voucher, token, "", map[string]string{"X-Room-Ticket": st.Ticket})
		if status != http.StatusOK || !env.Success || json.Unmarshal(env.Data, &st) != nil {
			t.Fatalf("poll: %d %+v", status, env)
		}
		if st.Pass != "" {
			return st.Pass
		}
		if time.Now().After(deadline) {
			t.Fatal("not admitted 20 s after joining")
		}
		// The room's own pace (pollAfterMs), as its page polls: a client's
		// interval, not synchronisation.
		time.Sleep(time.Duration(min(max(st.PollAfterMs, 100), 1000)) * time.Millisecond)
	}
}

type saleOrder struct {
	ID     string `json:"id"`
	UserID string `json:"userId"`
	State  string `json:"state"`
	PaidAt string `json:"paidAt"`
}

// adminOrders reads every order of the sale from the API, in id order.
func adminOrders(t *testing.T, base, token, voucher string) []saleOrder {
	t.Helper()
	status, env := call(t, http.MethodGet, base+"/admin/vouchers/"+voucher+"/orders?limit=1000", token, "", nil)
	var page struct {
		Orders []saleOrder `json:"orders"`
	}
	if status != http.StatusOK || json.Unmarshal(env.Data, &page) != nil {
		t.Fatalf("orders of %s: %d %+v", voucher, status, env)
	}
	return page.Orders
}

// download clicks the element sel and waits for the browser to save the
// file, which must be suggested as name; it returns the file's CSV records.
func download(t *testing.T, bctx context.Context, dir, sel, name string) [][]string {
	t.Helper()
	dctx, cancel := context.WithTimeout(bctx, 20*time.Second)
	defer cancel()
	begins := chromedp.Events(dctx, browser.DownloadWillBegin)
	progress := chromedp.Events(dctx, browser.DownloadProgress)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		t.Fatal(err)
	}
	var guid string
	for ev, err := range begins {
		if err != nil {
			t.Fatalf("no download began: %v", err)
		}
		if ev.SuggestedFilename != name {
			t.Fatalf("the download is named %q, want %q", ev.SuggestedFilename, name)
		}
		if strings.HasPrefix(ev.URL, "http") {
			t.Fatalf("the download came from %s, not from the page's own copy", ev.URL)
		}
		guid = ev.GUID
		break
	}
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("the download did not finish: %v", err)
		}
		if ev.GUID != guid {
			continue
		}
		if ev.State == browser.DownloadProgressStateCanceled {
			t.Fatal("the download was cancelled")
		}
		if ev.State == browser.DownloadProgressStateCompleted {
			break
		}
	}
	f, err := os.Open(filepath.Join(dir, guid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("the download is not CSV: %v", err)
	}
	return records
}

// doubleClick clicks sel twice as a person's double click does: two
// presses, the second counted as a second click (chromedp's DoubleClick
// sends one press counted as the second, which makes one click event).
func doubleClick(t *testing.T, bctx context.Context, sel string) {
	t.Helper()
	xy := evalJS[[]float64](t, bctx, fmt.Sprintf(`(e => { e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect(); `+
		`return [r.x + r.width / 2, r.y + r.height / 2]; })(document.querySelector(%q))`, sel))
	if err := chromedp.Do(bctx, chromedp.MouseClickXY(xy[0], xy[1]), chromedp.MouseClickXY(xy[0], xy[1], chromedp.ClickCount(2))); err != nil {
		t.Fatalf("double click %s: %v", sel, err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// exchange is one request the page sent, and its answer's status (0 until
// it came).
type exchange struct {
	method, url string
	headers     network.Headers
	status      int64
}

func (x exchange) header(name string) string {
	for k, v := range x.headers {
		if strings.EqualFold(k, name) {
			s, _ := v.(string)
			return s
		}
	}
	return ""
}

// netLog records what the page sends and what it is answered.
type netLog struct {
	mu    sync.Mutex
	byID  map[network.RequestID]*exchange
	order []network.RequestID
}

func watchNetwork(t *testing.T, bctx context.Context) *netLog {
	t.Helper()
	l := &netLog{byID: map[network.RequestID]*exchange{}}
	err := chromedp.Listen(bctx, func(ev any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			if _, ok := l.byID[ev.RequestID]; !ok {
				l.order = append(l.order, ev.RequestID)
			}
			l.byID[ev.RequestID] = &exchange{method: ev.Request.Method, url: ev.Request.URL, headers: ev.Request.Headers}
		case *network.EventResponseReceived:
			if x, ok := l.byID[ev.RequestID]; ok {
				x.status = ev.Response.Status
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *netLog) all() []exchange {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]exchange, 0, len(l.order))
	for _, id := range l.order {
		out = append(out, *l.byID[id])
	}
	return out
}

func pathOf(url string) string {
	_, rest, _ := strings.Cut(url, "://")
	_, p, _ := strings.Cut(rest, "/")
	p, _, _ = strings.Cut("/"+p, "?")
	return p
}

// sent lists the requests sent as method to path.
func (l *netLog) sent(method, path string) []exchange {
	var out []exchange
	for _, x := range l.all() {
		if x.method == method && pathOf(x.url) == path {
			out = append(out, x)
		}
	}
	return out
}

// await waits for the answer to a request sent as method to path with the
// token.
func (l *netLog) await(t *testing.T, method, path, token string) exchange {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, x := range l.sent(method, path) {
			if x.header("authorization") == token && x.status != 0 {
				return x
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never sent %s %s with the token, or it was never answered; it sent %d requests", method, path, len(l.all()))
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
}

// tokenOnlyInHeaders: no URL the page requested holds the token, and every
// request to an admin endpoint carried it in its header, asking for English.
func (l *netLog) tokenOnlyInHeaders(t *testing.T, token string) {
	t.Helper()
	for _, x := range l.all() {
		if strings.Contains(x.url, token) {
			t.Fatalf("the token is in a URL: %s", x.url)
		}
		p := pathOf(x.url)
		if p == "/admin/sales" || strings.HasPrefix(p, "/admin/assets/") || !strings.HasPrefix(p, "/admin/") && p != "/voucher/seckill" {
			continue
		}
		if x.header("authorization") == "" || x.header("Accept-Language") != "en" {
			t.Fatalf("%s %s went without the token's header or Accept-Language: en: %v", x.method, x.url, x.headers)
		}
	}
}
