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
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browserPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(390, 844),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	bctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", browserPath, err)
	}
	// The sale is created once the browser runs (its start takes seconds):
	// its begin leaves time to see the pre-queue.
	begin := time.Now().Add(domain.RoomLead + 2*time.Second)
	voucher := post(t, base+"/voucher/seckill", adminToken, fmt.Sprintf(
		`{"shopId":1,"title":"排队秒杀","payValue":8000,"actualValue":10000,"type":1,"stock":5,`+
			`"beginTime":%q,"endTime":%q,"waitingRoom":{"opensBeforeSeconds":60,"admitPerSecond":10}}`,
		begin.Format(time.RFC3339Nano), begin.Add(time.Hour).Format(time.RFC3339)))

	waitFor := func(what, cond string) {
		t.Helper()
		pctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if _, err := chromedp.Run(pctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
			shown, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
			t.Fatalf("the page never showed %s: %v\npage:\n%s", what, err, shown)
		}
	}

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
}
