package browser_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hmdp-go/seckill/domain"
)

// TestWaitingRoomPage: a person opens the waiting-room page of a sale with a
// room before it begins, joins, sees their place in the pre-queue, is
// admitted at the begin, and buys with one click.
func TestWaitingRoomPage(t *testing.T) {
	browserPath := chromium(t)
	base, app := startService(t)
	ctx := context.Background()
	adminToken, err := app.Tokens.Mint(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	userToken, err := app.Tokens.Mint(ctx, domain.UserID(4242))
	if err != nil {
		t.Fatal(err)
	}
	bctx := newBrowser(t, browserPath)
	// The sale is created once the browser runs (its start takes seconds):
	// its begin leaves time to see the pre-queue.
	begin := time.Now().Add(domain.RoomLead + 2*time.Second)
	voucher := post(t, base+"/voucher/seckill", adminToken, fmt.Sprintf(
		`{"shopId":1,"title":"排队秒杀","payValue":8000,"actualValue":10000,"type":1,"stock":5,`+
			`"beginTime":%q,"endTime":%q,"waitingRoom":{"opensBeforeSeconds":60,"admitPerSecond":10}}`,
		begin.Format(time.RFC3339Nano), begin.Add(time.Hour).Format(time.RFC3339)))

	waitFor := func(what, cond string) { t.Helper(); waitOn(t, bctx, what, cond) }

	err = chromedp.Do(bctx,
		chromedp.Navigate(base+"/waiting-room?voucher="+voucher),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), userToken),
		chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("join")),
		chromedp.Click(chromedp.ID("join")),
	)
	if err != nil {
		t.Fatalf("open the page and join: %v", err)
	}
	waitFor("the place in the pre-queue", `document.getElementById('state').dataset.state === 'pre_queue' &&
		document.getElementById('joined').textContent === '1'`)
	waitFor("the admission at the begin", `document.getElementById('state').dataset.state === 'admitted' &&
		document.getElementById('position').textContent === '1' && !document.getElementById('buy').hidden`)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("buy"))); err != nil {
		t.Fatal(err)
	}
	waitFor("the order", `/^[0-9]+$/.test(document.getElementById('result').dataset.order || '')`)

	// The admin's live sale page shows the room: one joined, admitted, and
	// the pass used by the purchase.
	adminLogin(t, bctx, base, adminToken)
	waitFor("the waiting room on the live sale page", fmt.Sprintf(
		`(document.querySelector('[data-voucher="%s"] [data-field="room"]:not([hidden])') || {}).textContent === `+
			`"Waiting room: 1 joined · 0 waiting · 1 admitted · 1 pass used · 0 expired"`, voucher))
}
